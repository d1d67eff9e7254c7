// The cluster worker's overlap of communication with compute (the config's
// `wire { overlap: true }`, docs/CLUSTER.md "Overlap"):
//
//   PartSender pushes each gradient as a part (PsClient::PushPart) from a
//   thread of its own as soon as the backward has produced it, so that the
//   push of the last layers' gradients overlaps the backward of the first.
//
//   GroupPuller pulls the next step's weights in groups of variables in
//   forward order, one PsClient::PullPart per group, all at once, so that
//   the forward starts on the first layers while the rest arrive.
//
// Neither changes a rule: the shards decide a push in parts as a whole one
// (ps/shard/shard.h, PushPart), and a pull of a group is a pull.
//
// Thread-safety: each object is driven by one thread (the worker's); its own
// threads touch only the tensors handed to it, which the caller leaves
// alone until Finish / Await says they are done.
#ifndef PSGD_WORKER_SESSION_OVERLAP_H_
#define PSGD_WORKER_SESSION_OVERLAP_H_

#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model_variables.h"
#include "common/mutex.h"
#include "ps/client/ps_client.h"

namespace psgd {

class PartSender {
 public:
  // `client` is not owned; its PushPart must allow a call beside the
  // worker's other calls (RemotePsClient's and InProcessPsClient's do).
  explicit PartSender(ps::PsClient* client);
  // Waits for the part being sent, drops the others.
  ~PartSender();
  PartSender(const PartSender&) = delete;
  PartSender& operator=(const PartSender&) = delete;

  // A new push tagged with `version`; Finish must have ended the last one.
  void Begin(const ps::ModelVersion& version);
  // One more gradient: sent with the others queued by then as one part.
  // `gradient` must stay unchanged until Finish returns.
  void Add(ps::NamedConstTensorView gradient);
  // Waits until every gradient added is sent. Each shard's reply is that of
  // the part that completed its push (skipped when it got no part); the
  // first error of a part as the push's error (the parts after it are not
  // sent).
  absl::StatusOr<ps::PushResult> Finish();

 private:
  void Loop();

  ps::PsClient* const client_;  // Not owned.
  Mutex mu_;
  CondVar changed_;
  ps::ModelVersion version_ ABSL_GUARDED_BY(mu_);
  std::deque<ps::NamedConstTensorView> queue_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  ps::PushResult result_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after the fields above
};

// Groups of variables for GroupPuller, in the order of `variables` (the
// forward's): a group is a variable and the small ones (below
// `small_bytes`, e.g. its bias) that follow it.
std::vector<std::vector<int>> PullGroups(
    const std::vector<VariableSpec>& variables, int64_t small_bytes = 4096);

class GroupPuller {
 public:
  // `client` is not owned; its PullPart must allow calls on several threads
  // at once.
  GroupPuller(ps::PsClient* client, std::vector<std::vector<int>> groups);
  // Joins the pulls in flight.
  ~GroupPuller();
  GroupPuller(const GroupPuller&) = delete;
  GroupPuller& operator=(const GroupPuller&) = delete;

  // Starts one pull per group of `out` (all the model's variables, in the
  // order the groups index) for `wanted`, each until `deadline`. The
  // tensors of `out` are written by the pulls until Await or Join.
  void Start(const ps::ModelVersion& wanted, absl::Time deadline,
             std::vector<ps::NamedTensorView> out);
  bool in_flight() const { return !threads_.empty(); }
  const ps::ModelVersion& wanted() const { return wanted_; }
  // Waits for the group of variable v: OK when it has arrived, else the
  // pull's error.
  absl::Status Await(int v);
  // Waits for every group: the version they make up (ps::MergePartVersions;
  // FAILED_PRECONDITION when a shard moved between the groups' pulls: pull
  // again whole), or the first pull's error.
  absl::StatusOr<ps::ModelVersion> Join();

 private:
  ps::PsClient* const client_;  // Not owned.
  const std::vector<std::vector<int>> groups_;
  std::vector<int> group_of_;  // variable -> group
  ps::ModelVersion wanted_;
  Mutex mu_;
  CondVar arrived_;
  // Per group, once its pull has returned.
  std::vector<bool> done_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::StatusOr<ps::ModelVersion>> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_OVERLAP_H_
