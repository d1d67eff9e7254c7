// A worker's session with the parameter servers, with no model in it: join,
// pull (whole, or in groups of variables that a forward awaits one by one),
// push (whole, or in parts as a backward produces them), each push's typed
// outcome, and recovery from transient failures (re-sync, rollback to a
// checkpoint, a lease that ran out). What a worker loop in C++
// (worker/cluster/cluster_worker.h) or in Python needs between its
// forward/backward passes:
//
//   WorkerSession s(client, variables, weight_buffers, options);
//   if (chief) s.Initialize(initial_values);
//   s.Start();                                 // join, first weights
//   for (;;) {
//     ... gradients from the weight buffers (at s.version()) ...
//     PushOutcome o = *s.Push(gradients);      // typed, recovered
//     s.PullAfterPush(o);                      // sync: waits for the step
//   }
//   s.Leave();
//
// Sync pulls wait until every shard is past the step pushed to it and then
// line the shards up (LineUp: a shard may complete a step a moment before
// another); async pulls take any newer weights. A failure that a worker
// waits out (UNAVAILABLE, ABORTED, a deadline while a server is away) goes
// through Recovery (worker/session/recovery.h): a push whose reply was lost
// is sent again (the shards that had it refuse the copy: kDuplicate), a
// gradient computed before a rollback is dropped (kRolledBack), a worker out
// of the live set joins again (kRejoined), and pulls after a rollback take
// the new generation's weights without waiting.
//
// Overlap (options.overlap; docs/CLUSTER.md "Overlap"): pushes go in parts
// from a sender thread (BeginParts, AddPart, FinishParts) and, in sync mode,
// the pull after a push goes in groups of variables on threads of their own
// (AwaitWeights). When a group's pull fails or finds the shards moved
// between the groups, PullWholeAfterGroups pulls the whole model as without
// overlap; a failed push in parts is sent again whole.
//
// Errors: the client's (DEADLINE_EXCEEDED when a step does not come within
// step_timeout, UNAVAILABLE when a server stays away for
// ps_unavailable_timeout, FAILED_PRECONDITION for a server of another
// cluster); CANCELLED when the servers shut down (training is over).
//
// Thread-safety: thread-compatible: one thread (the worker loop's) calls
// it (but InterruptPulls and ResumePulls, any thread); its own threads
// (overlap) touch only the weight buffers, which the caller leaves alone while
// pulls are in flight (until AwaitWeights or SettlePulls), and the gradients
// added as parts, until FinishParts.
#ifndef PSGD_WORKER_SESSION_WORKER_SESSION_H_
#define PSGD_WORKER_SESSION_WORKER_SESSION_H_

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model_variables.h"
#include "ps/client/ps_client.h"
#include "worker/session/lease_keeper.h"
#include "worker/session/overlap.h"
#include "worker/session/recovery.h"
#include "worker/session/step_outcome.h"

namespace psgd {

struct SessionOptions {
  int worker_id = 0;
  bool sync = true;
  // The first pull waits this long for the chief's initialisation (and, at
  // step 0, for the other workers to join).
  absl::Duration start_timeout = absl::Minutes(5);
  // A later pull waits this long for its step.
  absl::Duration step_timeout = absl::Minutes(10);
  // How long to keep retrying while a server is unavailable before giving
  // up with its error (zero: give up at once).
  absl::Duration ps_unavailable_timeout = absl::Minutes(5);
  // Pushes in parts and (sync) pulls in groups (the config's
  // wire { overlap: true }).
  bool overlap = false;
  // The servers hand out the data (data { sharding: SERVERS }): LeaseData
  // before each step, and each push carries its chunk.
  bool data_from_servers = false;
  // How many workers may fail to take part (ShardStatus::failed_workers)
  // before the job ends: total_num_replicas - training.min_workers.
  int allowed_failures = 0;
  // The chief's run summary (RunSummaryPath of the run directory): while
  // no server answers, its appearance says the job ended (Recovery).
  std::string job_end_marker;
};

// OK while at most `allowed` workers have failed in `status` (each shard's
// failed_workers, merged); else FAILED_PRECONDITION naming each failed
// worker and its reason, and how the config allows fewer workers.
absl::Status CheckWorkerFailures(const std::vector<ps::ShardStatus>& status,
                                 int allowed);

// INVALID_ARGUMENT naming the first bad field.
absl::Status ValidateSessionOptions(const SessionOptions& options);

// A lease answered "wait" (ParameterShard::LeaseData's UNAVAILABLE with
// ps::LeaseRefusal::kNotEnded): the last epoch's chunks are out with other
// workers, and any may come back.
bool DataNotEnded(const absl::Status& status);

// What became of a push.
struct PushOutcome {
  StepOutcome outcome = StepOutcome::kApplied;
  int64_t staleness = 0;  // async: the largest over the shards
  // Sync: N of the step pushed for, the largest over the shards (adaptive
  // backup workers choose it per step); 0 when no shard said.
  int replicas_to_aggregate = 0;
  // The generation the cluster is in afterwards (a new one when it rolled
  // back before the push landed).
  int64_t generation = 0;
  // Async, applied: the step it made, which every shard reaches once it has
  // applied shard 0's decision (the pull that follows waits for it there,
  // so that a worker reads its own update on every shard); 0 otherwise.
  int64_t step_made = 0;
};

class WorkerSession {
 public:
  const SessionOptions& options() const { return options_; }
  // `client` is not owned. `weights` are the buffers pulls write into:
  // every one of `variables` once, in their (forward) order, not owned;
  // both must outlive the session.
  WorkerSession(ps::PsClient* client, std::vector<VariableSpec> variables,
                std::vector<ps::NamedTensorView> weights,
                SessionOptions options);
  // Joins the pulls in flight.
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Chief: puts the initial values on every shard (shards that restored a
  // checkpoint keep theirs).
  absl::Status Initialize(absl::Span<const ps::NamedConstTensorView> initial);
  // Joins and pulls the first weights, waiting up to start_timeout for the
  // chief's Initialize; at step 0 also for every worker to join (a sync
  // step completes with min(N, live) gradients).
  absl::Status Start();

  // The version of the weight buffers: each shard's step and the
  // generation.
  const ps::ModelVersion& version() const { return version_; }
  // The version the next step computes from: version(), or (group pulls in
  // flight) the one they wait for.
  const ps::ModelVersion& ahead_version() const;
  // The variables pulls write, in their (forward) order.
  const std::vector<VariableSpec>& variables() const { return variables_; }
  // What the next push is tagged with: every shard's step as pulled, and
  // the chunk the gradient was computed from.
  ps::ModelVersion PushTarget() const;

  // Pushes the step's gradients whole, recovering from transient failures.
  absl::StatusOr<PushOutcome> Push(
      absl::Span<const ps::NamedConstTensorView> gradients);
  // Overlap: a push in parts. AddPart each gradient as it is ready (it
  // must stay unchanged until FinishParts); FinishParts waits for the
  // parts, with every gradient of the step to send again whole after a
  // transient failure.
  void AddPart(ps::NamedConstTensorView gradient);
  absl::StatusOr<PushOutcome> FinishParts(
      absl::Span<const ps::NamedConstTensorView> gradients);

  // The pull that follows a push (see above). With overlap in sync mode
  // it starts the groups' pulls and returns; AwaitWeights then waits.
  absl::Status PullAfterPush(const PushOutcome& pushed);
  // Overlap: waits for variable v's group (OK at once when no pulls are
  // in flight). Once every variable is there, version() is theirs.
  // FAILED_PRECONDITION when the groups disagree: PullWholeAfterGroups.
  absl::Status AwaitWeights(int v);
  // Overlap: group pulls started and not yet joined.
  bool pulls_in_flight() const {
    return puller_ != nullptr && puller_->in_flight();
  }
  absl::Status PullWholeAfterGroups();
  // Overlap: the pulls in flight, if any, joined; when they disagree or
  // failed, the whole model pulled again.
  absl::Status SettlePulls();
  // The newest weights without waiting for a step (the chief's final
  // evaluation).
  absl::StatusOr<ps::ModelVersion> PullLatest();

  // From any thread (a signal's watcher while the loop's thread waits in a
  // pull): the pulls under way end now, and those that start refuse, with
  // CANCELLED, until ResumePulls; the weights stay as they were. The
  // session may then Leave (also without ResumePulls).
  void InterruptPulls() { client_->InterruptPulls(); }
  void ResumePulls() { client_->ResumePulls(); }

  // The servers hand out the data (options().data_from_servers): the next
  // chunk of sample indices for this worker, leased at the weights'
  // generation; the next push carries it. A chunk whose push did not reach
  // shard 0 (a sync shard a step ahead got none) is given back first. After
  // a rollback the cluster is recovered and the newest weights pulled
  // (whole) before the lease is asked again; a server away is waited for
  // as for any call. While nothing is left to hand out but chunks of the
  // last epoch are out with other workers (DataNotEnded), it leases again
  // every 50 ms to 1 s, logging once what it waits for: a chunk that comes
  // back (its worker left or lost its lease) is this worker's to train.
  // `keep_waiting`, when set, is asked before each pause of that wait
  // (false: CANCELLED). OUT_OF_RANGE once the data ended; CANCELLED once
  // the servers shut down; DEADLINE_EXCEEDED after waiting step_timeout.
  absl::StatusOr<ps::DataChunk> LeaseData(
      const std::function<bool()>& keep_waiting = nullptr);
  // The chunk the next push carries, when the caller leased ahead (a
  // DataLoader's prefetch): a leased chunk, named as LeaseData returned it.
  void UseChunk(const ps::DataChunkRef& chunk);
  // Leases the chunk after the one of the step under way in the background
  // (the C++ worker calls it once it has its step's chunk), so that the
  // next LeaseData finds it leased and the step starts without a call to
  // shard 0. At most one chunk is held ahead. The next LeaseData takes it if
  // it is of the session's generation and nothing must be given back
  // first; a refusal (the data ended, or has not ended while others hold
  // the last chunks, another generation) or an error of the call ahead is
  // dropped, and LeaseData leases as without it. A chunk held ahead and
  // not trained goes back to the queue as any unpushed chunk does: at
  // Leave, when the worker's lease expires, at a rollback (a chunk of an
  // older generation is void and never pushed).
  void LeaseAhead();
  // The chunk LeaseAhead leased and no LeaseData has handed out yet, if
  // any (its call awaited first), for the worker's record of chunks it
  // never pushed; the session forgets it (the Leave gives it back).
  std::optional<ps::DataChunk> TakeLeasedAhead();
  // The chunk the next push carries (the last leased or used), if any.
  const std::optional<ps::DataChunkRef>& chunk() const { return chunk_; }

  // Every shard's status, recovering from transient failures.
  absl::StatusOr<std::vector<ps::ShardStatus>> Status();
  // Leaves the live set (first, at the end, so that no sync step waits for
  // this worker); CANCELLED when the servers are gone.
  absl::Status Leave();

  ps::PsClient* client() const { return client_; }
  // Hold it while the worker is silent on purpose (the chief evaluating).
  LeaseKeeper* lease_keeper() { return &lease_keeper_; }
  Recovery& recovery() { return recovery_; }
  // Sync: steps computed from shards at different steps (LineUp gave up).

 private:
  // Pull(wanted) that recovers from transient failures: after a recovery it
  // pulls again, from the new generation without waiting when the cluster
  // rolled back. With `line_up` (sync), LineUp follows.
  absl::StatusOr<ps::ModelVersion> PullSynced(ps::ModelVersion wanted,
                                              absl::Duration timeout,
                                              bool line_up);
  absl::StatusOr<ps::ModelVersion> LineUp(ps::ModelVersion version);
  absl::Status PullWhole(const ps::ModelVersion& wanted, bool line_up);
  absl::Status JoinGroups();
  // "worker J: WHAT STEP", a wait's name for the lease keeper's log.
  std::string WaitName(absl::string_view what, const ps::ModelVersion& v) const;
  // A first try's result made an outcome, recovering and pushing again.
  absl::StatusOr<PushOutcome> Settle(
      absl::StatusOr<ps::PushResult> pushed,
      absl::Span<const ps::NamedConstTensorView> gradients);
  absl::Status AwaitOtherWorkers();
  // Waits for LeaseAhead's call, if one runs, and keeps what it leased
  // (leased_ahead_) unless it is of another generation.
  void CollectLeaseAhead();
  // Joins again as a new incarnation (a refused push or lease said this
  // worker is out of the live set): every shard drops what it staged,
  // shard 0 takes back its chunks; a chunk leased ahead is void.
  absl::Status Rejoin();

  ps::PsClient* const client_;  // Not owned.
  const std::vector<VariableSpec> variables_;
  const std::vector<ps::NamedTensorView> weights_;  // Buffers not owned.
  const SessionOptions options_;
  Recovery recovery_;
  ps::ModelVersion version_;
  // Overlap only (null otherwise; the puller in sync mode only).
  std::unique_ptr<PartSender> sender_;
  bool parts_begun_ = false;
  // The data chunk of the step under way (LeaseData, UseChunk), and
  // whether it was pushed without shard 0, which settles it (then the next
  // LeaseData gives it back).
  std::optional<ps::DataChunkRef> chunk_;
  bool chunk_unsettled_ = false;
  // LeaseAhead's call while it runs, and the chunk it leased until a
  // LeaseData takes it.
  std::future<absl::StatusOr<ps::DataChunk>> lease_ahead_call_;
  std::optional<ps::DataChunk> leased_ahead_;
  int64_t lease_ahead_generation_ = 0;  // the cluster's, when it was asked
  std::unique_ptr<GroupPuller> puller_;
  size_t awaited_ = 0;  // variables arrived of the groups in flight
  // Renews the lease while the worker is silent on purpose: a pull that
  // waits for the next step, the chief's evaluation.
  LeaseKeeper lease_keeper_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_WORKER_SESSION_H_
