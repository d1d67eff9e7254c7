// One parameter-server shard as a plain C++ object with no network in it:
// it stores its variables (ps/state/variable_store.h), applies the optimizer
// (ps/state/optimizer.h) in sync mode (ps/state/sync_aggregator.h) or async
// mode (ps/state/async_applier.h), tracks worker membership
// (ps/state/membership.h) and counts what became of every push. The gRPC
// service (ps/server/grpc_service.h) and the in-process client
// (ps/testing/in_process_client.h) are thin layers over it. docs/PS.md states
// the rules.
//
// Rooms (docs/ARCHITECTURE.md): ParameterShard is the thread-safe front of
// the shard's state machine, the ShardCore (shard_core.h): it holds the
// mutex every core call runs under, does the work that needs no lock (the
// scan of a push's values, a checkpoint file's read), waits (pulls, shard
// 0's relay backlog), and answers the pulls a call made ready once the lock
// is released. The core holds what the shard learns (the ShardModel:
// weights, optimizer slots, step, sync aggregate, async record), the staged
// pushes, the waiting pulls, membership and the counters, and applies every
// decision through one path; shard 0's and a lone shard's rules are a
// Coordinator (coordinator.h), which decides and never applies; the
// decisions in order are the DecisionLog (decision_log.h) and shard 0's
// DecisionRelay (decision_relay.h), which this front owns. The checkpoints
// are the ShardCheckpointing (shard_checkpointing.h), the data queue the
// ShardDataRoom (shard_data_room.h), the held pulls the WaitingPulls
// (waiting_pulls.h).
//
// Errors (every refusal leaves weights, optimizer slots, step and
// membership exactly as they were; only the refusal counters move):
//   INVALID_ARGUMENT     a malformed request: unknown variable, wrong shape
//                        or byte count, a dtype other than float32, NaN or
//                        Inf, a gradient value beyond kMaxGradientMagnitude
//                        (ps/state/variable_store.h), a negative step, a worker
//                        id out of range.
//   FAILED_PRECONDITION  a request that does not fit the shard's state: not
//                        initialised, another cluster's name, a step from
//                        the future, a second push for a step, a worker that
//                        has not joined, an Initialize with another variable
//                        set, a gradient beyond async max_push_staleness.
//   DEADLINE_EXCEEDED    a pull whose step was not reached in time.
//   ABORTED              a push or pull of another generation (the cluster
//                        rolled back to a checkpoint), or any push or pull
//                        while the shard waits for the rollback after
//                        restoring a checkpoint; a pull waiting when the
//                        shard rolls back. The worker re-syncs.
//   CANCELLED            anything after Shutdown.
//
// Checkpoints (docs/RELIABILITY.md): with options().checkpoint.dir set, the
// shard restores the newest complete checkpoint when it is created and then
// waits (awaiting_rollback) until a Rollback gives it the cluster's next
// generation; it saves its state at step 0, at every multiple of
// checkpoint.every_steps, when asked (RequestCheckpoint) and at Shutdown.
// The state is copied under the mutex and written by a thread of its own
// (ps/checkpoint/checkpoint_writer.h).
//
// Thread-safety: thread-safe. One mutex guards the state; gradients are
// checked for NaN, Inf and magnitude before it is taken, and weights are
// published as immutable snapshots that pulls read without it. Pull callbacks
// run on the thread that made the step ready (a pusher, Initialize, Shutdown,
// or the caller of PullAsync), never under the mutex.
#ifndef PSGD_PS_SHARD_SHARD_H_
#define PSGD_PS_SHARD_SHARD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "common/tensor.h"
#include "common/thread_pool.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/shard/decision_relay.h"
#include "ps/shard/push_checks.h"
#include "ps/shard/shard_checkpointing.h"
#include "ps/shard/shard_core.h"
#include "ps/shard/waiting_pulls.h"
#include "ps/state/data_queue.h"
#include "ps/state/ledger.h"
#include "ps/state/options.h"
#include "ps/state/types.h"
#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

class ParameterShard final {
 public:
  using Snapshot = WaitingPulls::Snapshot;
  using PullDone = WaitingPulls::PullDone;
  using InitializeReply = ps::InitializeReply;
  using MembershipReply = ps::MembershipReply;
  using RollbackReply = ps::RollbackReply;
  // What Create restored.
  using RestoreReport = ShardCheckpointing::RestoreReport;

  // INVALID_ARGUMENT for options that ValidateShardOptions refuses. With a
  // checkpoint directory, restores the newest checkpoint complete for every
  // shard (restore_report() says which and what it refused); INTERNAL when
  // the directory cannot be made or read, FAILED_PRECONDITION when the
  // checkpoint belongs to a cluster of other options (mode, workers,
  // optimizer).
  static absl::StatusOr<std::unique_ptr<ParameterShard>> Create(
      const ShardOptions& options);

  // Per-host checkpoints (options().checkpoint.per_host): Create restores
  // nothing; the shard is "agreeing" and refuses every request but Status,
  // ListCheckpoints and Shutdown with UNAVAILABLE until RestoreAgreed.
  // The checkpoints complete in this shard's directory, newest first (empty
  // without a checkpoint directory).
  std::vector<CompleteCheckpointInfo> CompleteCheckpoints() const;
  // Ends the agreement: restores checkpoint `label` of this shard's own
  // directory (restore_report() says so; the shard then awaits the
  // rollback, as after a restore at Create) or, for -1, starts empty.
  // FAILED_PRECONDITION unless the shard is agreeing; NOT_FOUND / DATA_LOSS
  // when that checkpoint is not complete here (the shard stays agreeing).
  absl::Status RestoreAgreed(int64_t label);
  bool agreeing() const;

  // Shuts down first when Shutdown has not run: waiting pulls end.
  ~ParameterShard();
  ParameterShard(const ParameterShard&) = delete;
  ParameterShard& operator=(const ParameterShard&) = delete;

  const ShardOptions& options() const { return options_; }
  // The threads of the shard's bulk work (options().bulk_threads): the
  // optimizer's update, and what the transports copy for it (a push's
  // gradients out of a worker's shared memory, a pull's weights into it).
  ThreadPool* bulk_pool() const { return bulk_.get(); }
  // Constant once Create (or, per host, RestoreAgreed) has returned.
  const RestoreReport& restore_report() const { return restore_report_; }

  // OK when `cluster` is this shard's cluster name; FAILED_PRECONDITION
  // naming both names otherwise.
  absl::Status CheckCluster(absl::string_view cluster) const;

  // The checks of a push's tensors that read their values, on the bulk
  // pool's threads, against the shard's layout (push_checks.h). Every
  // push's tensors go through them.
  std::vector<absl::Status> CheckPushedTensors(
      absl::Span<const TensorBytes> tensors,
      absl::Span<float* const> copy_to) const ABSL_LOCKS_EXCLUDED(mu_);

  // Defines the shard's variables and their initial values (step 0) the
  // first time; afterwards OK with already_initialized when `variables`
  // have the same names and shapes (the values are ignored), else
  // FAILED_PRECONDITION naming the difference. Also FAILED_PRECONDITION when
  // the variables would not fit in options().max_message_bytes.
  absl::StatusOr<InitializeReply> Initialize(
      absl::Span<const TensorBytes> variables);

  // Calls `done` with the weights once the shard is initialised and at step
  // >= min_step (and, in async mode with a staleness_bound, once the worker
  // is within the bound of the slowest other live worker: SspClock): at
  // once (on this thread) when it is, else on the thread that gets it
  // there. Errors through `done`: INVALID_ARGUMENT for a
  // negative min_step or a worker_id other than -1 (no worker) out of
  // range, CANCELLED at shutdown. Returns a ticket for CancelPull, or 0 when
  // `done` has already run.
  // `generation` > 0 must be the shard's (ABORTED otherwise); 0 takes any.
  // The snapshot carries the generation.
  uint64_t PullAsync(int64_t min_step, int worker_id, PullDone done,
                     int64_t generation = 0);
  // Withdraws a waiting pull: true when it was waiting (done will never
  // run), false when done has run or is running.
  bool CancelPull(uint64_t ticket);
  // PullAsync, waiting at most until `deadline` (DEADLINE_EXCEEDED).
  absl::StatusOr<Snapshot> Pull(int64_t min_step, int worker_id,
                                absl::Time deadline, int64_t generation = 0);

  // A worker's gradients (one per variable, computed from the shard's weights
  // at `step`). Sync: aggregated, applied (completes the step) or dropped;
  // async: applied. See the error list above. `generation` as for
  // PullAsync. `chunk`: the data chunk the gradient was computed from
  // (LeaseData; null: the worker reads data of its own), which the
  // decision settles; a chunk the worker no longer holds (given back at
  // its leave or expired lease, or of an older generation's queue) makes
  // the gradient dropped as stale, since its samples are back in the queue.
  // `push_id`: the worker's name for the push (a cluster of several
  // shards, below; 0 otherwise).
  // `keep`: holds the memory the gradients lie in (the request that brought
  // them, never memory a worker can still write); with it a shard of several
  // stages the gradients where they are and keeps `keep` until it drops
  // them, without it (null) it stages copies.
  absl::StatusOr<PushReply> Push(int worker_id, int64_t step,
                                 absl::Span<const TensorBytes> gradients,
                                 int64_t generation = 0,
                                 const DataChunkRef* chunk = nullptr,
                                 uint64_t push_id = 0,
                                 std::shared_ptr<const void> keep = nullptr);

  // One part of a worker's push (docs/PS.md, "Pushes in parts"): gradients
  // of some of the shard's variables, each variable in exactly one part of
  // the push. The part is checked on arrival (dtype, byte count, NaN, Inf
  // and magnitude outside the mutex, names and shapes under it), copied and
  // staged for (worker, step, generation); staged gradients count for
  // nothing. The part that completes the set of variables is decided as
  // Push decides a whole push (same checks, outcome, counters, staleness),
  // and the stage is emptied whatever the decision. An incomplete part's
  // reply has `staged` set. A part for a newer step (or after a rollback)
  // replaces what the worker had staged; one for an older step is refused
  // (FAILED_PRECONDITION). A whole Push that succeeds, a Leave, an expired
  // lease and a rollback drop the worker's staged parts. Refusals as Push's,
  // plus INVALID_ARGUMENT for an empty part or a variable that is already
  // staged; a refused part changes nothing but the `refused` counter.
  absl::StatusOr<PushReply> PushPart(
      int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
      int64_t generation = 0, const DataChunkRef* chunk = nullptr,
      uint64_t push_id = 0, std::shared_ptr<const void> keep = nullptr);

  // A cluster of several shards (options().num_shards > 1; docs/PS.md, "One
  // decision per push"): Push and PushPart only stage a complete push (the
  // reply has `staged` set; every check of a push but the decision's is
  // made), on every shard. Shard 0, the coordinator, decides a staged push
  // when the worker commits it, having seen every shard stage it: the
  // decision is the one Push makes alone (applied, aggregated, dropped,
  // refused), and every update it makes is published as a Decision that
  // the other shards apply in order (ApplyDecisions) to the gradients they
  // staged. Only the coordinator completes steps, expires leases and
  // chooses N; the other shards follow.
  //
  // A staged push is known by (worker, push_id), the id the worker gave all
  // its parts on every shard; a worker may have several staged (async: a
  // push staged before the decision of its previous one reached a shard).
  //
  // Commit, on shard 0: decides the worker's push `push_id`, staged for
  // `step` (of `generation`; `chunk` as for Push). FAILED_PRECONDITION on
  // any other shard, or when that push is not staged here complete;
  // otherwise Push's refusals and reply.
  absl::StatusOr<PushReply> Commit(int worker_id, int64_t step,
                                   int64_t generation, uint64_t push_id,
                                   const DataChunkRef* chunk = nullptr);
  // DecidePush, on shard 0: a whole push (shard 0's gradients of it) that
  // every other shard has staged, decided at once from `gradients` as Push
  // decides on a lone shard, and published as the decision of push
  // `push_id` (the id the worker staged it under on the others): the
  // commit of a whole push in the call that carries it, with nothing
  // staged here. FAILED_PRECONDITION on any other shard and on a lone
  // shard, INVALID_ARGUMENT for push_id 0; otherwise Push's refusals and
  // reply. The worker's pushes staged here before it (parts never
  // committed) are dropped, as a Commit drops them.
  absl::StatusOr<PushReply> DecidePush(int worker_id, int64_t step,
                                       absl::Span<const TensorBytes> gradients,
                                       int64_t generation, uint64_t push_id,
                                       const DataChunkRef* chunk = nullptr);
  // On a shard other than 0: applies shard 0's `decisions` of `generation`
  // in seq order, skipping those already applied; returns the last seq
  // applied. ABORTED for another generation or while awaiting a rollback;
  // FAILED_PRECONDITION naming the step and the shard for a decision that
  // skips one (a gap), one that disagrees with the decision of the same seq
  // already applied or with the shard's step, or one whose gradient the
  // shard has not staged. Decisions before the refused one stay applied.
  absl::StatusOr<int64_t> ApplyDecisions(int64_t generation,
                                         absl::Span<const Decision> decisions);
  // On shard 0 of a cluster of several shards: how its decisions reach the
  // others (ps/shard/decision_relay.h); until it is set they wait.
  void ConnectFollowers(DecisionRelay::Deliver deliver);
  // Shard 0: waits until every other shard has applied every decision made
  // so far (true), or `deadline`. True at once on any other shard.
  bool AwaitDecisionsDelivered(absl::Time deadline);

  // Membership. Join and Leave are idempotent. A Leave that makes the
  // current sync step complete applies it before returning.
  // `incarnation` tells the worker's processes apart (JoinRequest, 0 for
  // none): a Join with another one than the worker's last drops the parts
  // it had staged (a process killed between the parts of a push, started
  // again). ABORTED for a worker not live while the shard awaits the
  // rollback to the checkpoint it restored (it joins after the rollback);
  // a refused Join changes nothing.
  absl::StatusOr<MembershipReply> Join(int worker_id, uint64_t incarnation = 0);
  // The stored variables (name, shape) in the shard's order; none before
  // the first Initialize or restore.
  std::vector<VariableSpec> Variables() const;
  // `failure`: why the worker cannot take part (empty for an ordinary
  // leave); kept for Status().failed_workers until the worker joins again.
  absl::StatusOr<MembershipReply> Leave(int worker_id,
                                        absl::string_view failure = {});

  // Leases: every live worker that has sent nothing since
  // now - options().worker_lease and is not waiting in a pull leaves, as
  // with Leave (a pull that returns counts as a sign of life). Returns the
  // workers that left, ascending. Nothing happens with a zero lease or after
  // Shutdown. The server calls it periodically.
  std::vector<int> ExpireWorkers(absl::Time now);

  ShardStatus Status() const;
  // Before a push's bytes are decoded: CheckKnownShapes (push_checks.h)
  // against the shard's variables.
  absl::Status CheckKnownShapes(absl::Span<const TensorBytes> tensors) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The most bytes the shard's tensors take on the wire, each placed at a
  // `align`-byte boundary after `header` bytes (float32 is the widest wire
  // dtype): what a shared memory region for its pushes and pulls can need.
  // `header` alone before Initialize.
  int64_t MaxTensorAreaBytes(int64_t header, int64_t align) const;

  // The data queue (options().data_queue_on, shard 0 of a cluster with
  // data { sharding: SERVERS }; docs/PS.md, "The servers hand out the
  // data"): the next chunk of the training data for `worker_id`, a live
  // member. A worker's chunks are bound to its pushes in order: each push
  // of the worker that this shard decides settles its oldest chunk, done
  // once the gradient is applied (sync: when the step it was aggregated
  // into is applied) and back in the queue when it is dropped (stale,
  // surplus) or refused as too stale. A Leave, an expired lease and a Join
  // of a new incarnation give the worker's chunks back; a rollback or a
  // restore puts the queue where the checkpoint's weights are.
  // `give_back`: a chunk of the worker's that it gives back unused (a step
  // it will not push), before the lease. Errors: FAILED_PRECONDITION
  // without a queue, for a worker that is not live, for one that already
  // holds DataLeases::kMaxLeasesPerWorker chunks it has neither pushed nor
  // given back (no worker drains the queue), or for a chunk given back whose
  // gradient is already in the step's aggregate (LeaseRefusal::kNotYours, as
  // the queue's refusals of `give_back` below). Once nothing of the data_epochs
  // epochs is left to hand out: UNAVAILABLE (LeaseRefusal::kNotEnded, its
  // message starting with kDataNotEnded,
  // naming chunks and their workers) while another worker holds one it has
  // not pushed and is not waiting in a pull (a dead worker's chunk comes
  // back when its lease runs out, and is trained); otherwise OUT_OF_RANGE
  // (the data ended; at once for a worker holding unpushed chunks of its
  // own). A lease renews the worker's lease. ABORTED for another generation;
  // the queue's refusals of `give_back` (ps/state/data_queue.h: twice, another
  // epoch's or generation's lease). A refusal changes nothing.
  absl::StatusOr<DataChunk> LeaseData(int worker_id, int64_t generation = 0,
                                      const DataChunkRef* give_back = nullptr);
  // Where the queue is; nullopt without one.
  std::optional<DataQueuePosition> DataPosition() const;

  // The newest weights, also after Shutdown; null before Initialize. For
  // tests and reports.
  Snapshot LatestWeights() const;

  // A copy of optimizer slot `name` of variable `index` (layout order);
  // empty when there is none or before Initialize. For tests.
  std::vector<float> CopySlot(absl::string_view name, int index) const;

  // The cluster rolls back to checkpoint step-<label> and enters
  // `generation`: unless the shard is already in that generation or a later
  // one (then nothing happens: a duplicate or late request), it loads its
  // file of that checkpoint (all state but the live set, which stays as it
  // is), ends waiting pulls with ABORTED, deletes its files of later
  // checkpoints and records the rollback. A shard awaiting the rollback to
  // the checkpoint it restored only takes the generation. INVALID_ARGUMENT
  // for generation < 1 or a negative label; FAILED_PRECONDITION without a
  // checkpoint directory; NOT_FOUND / DATA_LOSS when the checkpoint is
  // missing or not complete (the shard is unchanged).
  absl::StatusOr<RollbackReply> Rollback(int64_t label, int64_t generation);

  // Saves a checkpoint labelled `label`: now (the current state) when `now`
  // or when the step is already >= label, else at the first step >= label.
  // FAILED_PRECONDITION without a checkpoint directory or before
  // Initialize, ABORTED while awaiting a rollback, INVALID_ARGUMENT for a
  // negative label.
  absl::Status RequestCheckpoint(int64_t label, bool now);

  // Waits until every checkpoint saved so far is on disk (or failed).
  void FlushCheckpoints();

  // Training is over: waiting pulls end with CANCELLED, later requests are
  // refused with CANCELLED (Status still answers). Saves the state first
  // when a checkpoint directory is set and the current step is not saved
  // yet. Idempotent.
  void Shutdown(absl::string_view reason);
  // True once Shutdown has run; waits for it until `deadline`.
  bool AwaitShutdown(absl::Time deadline) const;

 private:
  using Ready = ShardCore::Ready;

  explicit ParameterShard(const ShardOptions& options);

  // The layout of the shard's variables; null before Initialize.
  std::shared_ptr<const VariableLayout> Layout() const ABSL_LOCKS_EXCLUDED(mu_);
  // Push on a lone shard, DecidePush on shard 0: the whole push checked
  // and decided at once (`push_id`: the decision's name for it).
  absl::StatusOr<PushReply> DecideWhole(int worker_id, int64_t step,
                                        absl::Span<const TensorBytes> gradients,
                                        int64_t generation,
                                        const DataChunkRef* chunk,
                                        uint64_t push_id);
  // Push and PushPart: the tensors checked and copied outside the lock, then
  // staged (a whole push replaces the worker's staged parts).
  absl::StatusOr<PushReply> Stage(int worker_id, int64_t step,
                                  absl::Span<const TensorBytes> gradients,
                                  int64_t generation, const DataChunkRef* chunk,
                                  uint64_t push_id, bool whole,
                                  std::shared_ptr<const void> keep);
  // Shard 0, before it decides a committed push: waits while more than
  // kMaxDecisionBacklog decisions have not reached every shard (at most a
  // few seconds for a shard that does not take them).
  void AwaitRelayBacklog();
  // After the lock: writes the ledger lines added under it, then answers
  // the pulls in `ready`.
  void RunReady(Ready* ready);
  // Opens the checkpoint store and restores the newest complete checkpoint.
  absl::Status OpenCheckpoints();

  bool coordinated() const { return options_.num_shards > 1; }
  bool follower() const { return coordinated() && options_.shard_index != 0; }

  // Constant after construction.
  const ShardOptions options_;
  const std::string name_;  // "shard 0", for messages
  // The threads of the bulk work (options().bulk_threads); their use needs
  // no lock of ours (the pool serialises its loops).
  const std::unique_ptr<ThreadPool> bulk_;
  // Shard 0 of several shards: carries its decisions to the others (the
  // core's decision log publishes them to it). Null otherwise.
  std::unique_ptr<DecisionRelay> relay_;
  // Constant after Create; null without options().ledger_file. Lines are
  // added under mu_ (the core's data room) and written by RunReady, after
  // it.
  std::unique_ptr<Ledger> ledger_;
  // Written by Create or RestoreAgreed before the server reads it.
  RestoreReport restore_report_;
  // Shard 0: a commit waits while more decisions than this have not
  // reached every shard (flow control; below
  // ShardCore::kMaxCompletePerWorker).
  static constexpr int64_t kMaxDecisionBacklog = 64;

  mutable Mutex mu_;
  // Signalled when the core shuts down.
  mutable CondVar shutdown_cv_;
  // The shard's state and the requests that change it (shard_core.h).
  ShardCore core_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_SHARD_H_
