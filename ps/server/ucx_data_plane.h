// The server's side of the UCX data plane (cluster config `wire {
// data_plane: UCX }`, docs/PS.md "Tensors over UCX"): a UCX listener
// (ps/ucx/messenger.h) that takes pushes and pulls, while the gRPC service
// (ps/server/grpc_service.h) keeps every other call, Join among them.
//
// Keys: a worker that joins over gRPC (authenticated by the cluster's token
// and TLS) is given a key of its own (Admit); every data message carries it.
// The key belongs to the first UCX connection that uses it, until a Join of
// the worker says it connects anew (JoinRequest.ucx_new_link). A message
// whose key the listener does not know, or that comes over another
// connection than its key's, is dropped by the messenger before its data is
// read; one whose request names another worker than the key's is refused
// (PERMISSION_DENIED) and counted; none reaches the shard. A worker that
// leaves loses its key (Revoke). A connection that presents no accepted
// key within 5 s is closed, and no more than 64 such wait at once
// (ucx::MessengerOptions); keys are compared in constant time.
//
// On the wire (ps/wire/wire.h's kUcxPush, kUcxPull), method 1 is a push: the
// header a PushRequest whose gradients are TensorData.shared offsets into the
// payload (as for a shared memory segment, ps/wire/shared_memory.h: a 64-byte
// head, then the tensors at offsets aligned to 64), the reply header a
// PushResponse. Method 2 is a pull: the header a PullRequest, the reply a
// PullResponse whose variables lie in the reply's payload the same way, sent
// straight from the weights' snapshot (or its encoding in the wire dtype,
// ps/server/pull_weights.h). Method 3 withdraws a pull whose caller gave up
// on it (its deadline passed, or it was cancelled), as gRPC cancels the
// server's side of a call: the header is the pull's call number (8 bytes,
// little-endian) over the same connection; a pull still waiting for its step
// is taken back from the shard and never answered, and the withdrawal is
// answered OK whether or not it found one. Method 4 (kUcxCommit) is a
// commit: the header a CommitRequest, no payload, the reply header a
// PushResponse, as for the gRPC Commit call. Method 5 (kUcxDecidePush) is
// the DecidePush call: a push as method 1 that shard 0 decides at once. The
// request handler
// (ps/server/request_handler.h) checks and applies pushes, pulls and
// commits, as for gRPC.
//
// Threads: the messenger's thread receives; pushes are handled by a few
// threads of the data plane's own (a push or a commit may wait for the
// decisions on their way, ps/shard/shard.h), pulls are registered from the
// messenger's thread and answered from the thread that completes their step.
//
// Thread-safety: thread-safe.
#ifndef PSGD_PS_SERVER_UCX_DATA_PLANE_H_
#define PSGD_PS_SERVER_UCX_DATA_PLANE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "proto/ps.pb.h"
#include "ps/server/pull_weights.h"
#include "ps/server/request_handler.h"
#include "ps/shard/shard.h"
#include "ps/ucx/messenger.h"

namespace psgd {
namespace ps {

class UcxDataPlane {
 public:
  // What it dropped or refused, and what it served.
  struct Counters {
    int64_t pushes = 0;   // handled (whatever the shard answered)
    int64_t commits = 0;  // handled (whatever the shard answered)
    int64_t pulls = 0;    // registered with the shard
    // Pulls still waiting for their step when their worker's endpoint went
    // (the process killed, the link gone): taken back from the shard, as a
    // gRPC pull is when its call is cancelled.
    int64_t pulls_cancelled = 0;
    // Pulls still waiting when their caller withdrew them (method 3): taken
    // back from the shard, not answered.
    int64_t pulls_withdrawn = 0;
    // A key of one worker on a request that names another.
    int64_t wrong_worker = 0;
    // A header that is no request of its method, or an unknown method.
    int64_t malformed = 0;
    // The messenger's: unknown keys, malformed messages, failed receives.
    ucx::DropCounts messenger;
  };

  // Starts UCX on `transports` and listens on `host` (an IPv4 address;
  // "0.0.0.0" for every interface), any port; pushes carry gradients of
  // wire.gradients (pull_weights answers in wire.weights). Errors as
  // ucx::Messenger::Create and Listen.
  static absl::StatusOr<std::unique_ptr<UcxDataPlane>> Start(
      ParameterShard* shard, PullWeights* pull_weights, WireDTypes wire,
      const std::string& transports, const std::string& host);
  // Answers the pushes received, then stops the listener. The shard must be
  // shut down first (no pull waiting).
  ~UcxDataPlane();
  UcxDataPlane(const UcxDataPlane&) = delete;
  UcxDataPlane& operator=(const UcxDataPlane&) = delete;

  int port() const { return port_; }
  const std::string& transports() const { return messenger_->transports(); }

  // Where worker `worker_id` (>= 0, joined) sends its tensors, and its key:
  // the same key on every Join until it leaves, bound to the connection that
  // uses it first; with `new_link`, to the next one that uses it. INTERNAL
  // when no random key can be made.
  absl::Status Admit(int worker_id, bool new_link, wire::UcxDataPlane* out);
  // The worker's key is no longer accepted (it left).
  void Revoke(int worker_id);

  Counters counters() const;

 private:
  UcxDataPlane(ParameterShard* shard, PullWeights* pull_weights,
               WireDTypes wire);

  // On the messenger's thread.
  void OnRequest(ucx::Request request);
  void ServePull(ucx::Request request);
  void ServeWithdraw(const ucx::Request& request);
  void OnPeerGone(uint64_t peer);
  // On a push thread.
  void ServePush(const ucx::Request& request);
  void ServeCommit(const ucx::Request& request);
  // Serves the pushes and commits queued, in order.
  void PushLoop();
  // The worker whose key `key` is; -1 for none. Every key is compared
  // (ucx::KeysEqual): no lookup keyed by the secret.
  int WorkerOf(const ucx::Key& key);
  // Whether `request`'s key is worker `worker_id`'s; otherwise answers it
  // PERMISSION_DENIED (naming `what`, "push" or "pull") and counts it.
  bool KeyIsWorkers(const ucx::Request& request, absl::string_view what,
                    int worker_id);

  ShardRequestHandler handler_;
  PullWeights* const pull_weights_;  // Not owned.
  std::unique_ptr<ucx::Messenger> messenger_;
  int port_ = 0;

  Mutex keys_mu_;
  std::map<int, ucx::Key> key_of_ ABSL_GUARDED_BY(keys_mu_);

  // The pulls waiting in the shard, by the peer they came from: a pull's
  // slot holds its ticket (ParameterShard::CancelPull) until it is
  // answered.
  struct PullSlot {
    uint64_t call = 0;  // the pull's call number on its connection
    uint64_t ticket = 0;
    bool answered = false;
  };
  Mutex waiting_mu_;
  std::map<uint64_t, std::set<PullSlot*>> waiting_ ABSL_GUARDED_BY(waiting_mu_);

  Mutex queue_mu_;
  CondVar queue_changed_;
  // Pushes and commits (either may wait, ps/shard/shard.h).
  std::deque<ucx::Request> pushes_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::vector<std::thread> push_threads_;

  std::atomic<int64_t> served_pushes_{0};
  std::atomic<int64_t> served_commits_{0};
  std::atomic<int64_t> served_pulls_{0};
  std::atomic<int64_t> pulls_cancelled_{0};
  std::atomic<int64_t> pulls_withdrawn_{0};
  std::atomic<int64_t> wrong_worker_{0};
  std::atomic<int64_t> malformed_{0};
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_UCX_DATA_PLANE_H_
