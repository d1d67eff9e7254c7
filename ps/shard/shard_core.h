// The state machine of one shard (docs/PS.md, "One decision per push"):
// what a shard holds - the weights, optimizer slots and step (ShardModel),
// the staged pushes, the waiting pulls, membership, the counters, the
// generation - and the requests that change it, each a plain call that runs
// to its end: no mutex, no thread, no wait, no file read. Every shard
// applies decisions through one function (ApplyDecision), in sequence
// order: shard 0 and a lone shard the decisions their coordinator's rules
// make (coordinator.h), the other shards those shard 0 sends them, checked
// by the decision log (decision_log.h).
//
// ParameterShard (shard.h) is its thread-safe front: it holds the mutex
// that every call here runs under, does the work that needs no lock (the
// scan of a push's values, a checkpoint file's read), waits (a pull's
// deadline, shard 0's relay backlog) and runs the pull answers that a call
// leaves in `ready` once the lock is released. The requests' rules and
// their refusals are documented there; a call here refuses as the request
// of the same name does, before the front adds its context.
//
// Rooms: ShardModel (shard_model.h), WaitingPulls (waiting_pulls.h),
// PushStage (ps/state/push_stage.h), ShardDataRoom (shard_data_room.h),
// ShardCheckpointing (shard_checkpointing.h, which copies and installs the
// state through the ShardCheckpointing::Core calls below), Coordinator and
// DecisionLog.
//
// Thread-safety: none; ParameterShard calls it under its mutex.
#ifndef PSGD_PS_SHARD_SHARD_CORE_H_
#define PSGD_PS_SHARD_SHARD_CORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "common/thread_pool.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/shard/coordinator.h"
#include "ps/shard/decision_log.h"
#include "ps/shard/decision_relay.h"
#include "ps/shard/shard_checkpointing.h"
#include "ps/shard/shard_data_room.h"
#include "ps/shard/shard_model.h"
#include "ps/shard/waiting_pulls.h"
#include "ps/state/data_queue.h"
#include "ps/state/ledger.h"
#include "ps/state/membership.h"
#include "ps/state/options.h"
#include "ps/state/push_stage.h"
#include "ps/state/types.h"
#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

struct InitializeReply {
  int64_t step = 0;
  bool already_initialized = false;
};
struct MembershipReply {
  int64_t step = 0;
  std::vector<int> live_workers;
};
struct RollbackReply {
  int64_t step = 0;
  int64_t generation = 1;
  // False when the shard was already in that generation (or a later one).
  bool rolled_back = false;
};

class ShardCore final : private ShardCheckpointing::Core {
 public:
  using Snapshot = WaitingPulls::Snapshot;
  using PullDone = WaitingPulls::PullDone;
  // Pull answers to run after the lock (WaitingPulls::Ready).
  using Ready = WaitingPulls::Ready;
  using RestoreReport = ShardCheckpointing::RestoreReport;

  // The most complete pushes of one worker staged here awaiting shard 0's
  // decisions.
  static constexpr int kMaxCompletePerWorker = 128;

  // `options` outlive the core; `bulk` runs the optimizer's update; `relay`
  // (shard 0 of several, else null) takes the published decisions.
  ShardCore(const ShardOptions& options, std::string name, ThreadPool* bulk,
            DecisionRelay* relay);
  ShardCore(const ShardCore&) = delete;
  ShardCore& operator=(const ShardCore&) = delete;

  // Opening (ParameterShard::Create).
  absl::Status OpenQueue() { return data_.OpenQueue(); }
  void set_ledger(Ledger* ledger) { data_.set_ledger(ledger); }
  // Restores the newest checkpoint complete for every shard.
  absl::Status OpenCheckpoints(std::unique_ptr<CheckpointStore> store);
  const RestoreReport& restore_report() const { return checkpoints_.report(); }

  // What the requests read.
  bool initialized() const { return model_.initialized(); }
  int64_t step() const { return model_.step(); }
  std::shared_ptr<const VariableLayout> layout() const {
    return model_.shared_layout();
  }
  bool shut_down() const { return shut_down_; }
  std::vector<VariableSpec> Variables() const;
  Snapshot LatestWeights() const { return model_.current(); }
  std::vector<float> CopySlot(absl::string_view name, int index) const {
    return model_.CopySlot(name, index);
  }
  int64_t MaxTensorAreaBytes(int64_t header, int64_t align) const;
  ShardStatus Status() const;
  std::optional<DataQueuePosition> DataPosition() const {
    return data_.Position();
  }

  // Initialize: `store` is VariableStore::Create's result for `variables`.
  absl::StatusOr<InitializeReply> Initialize(
      absl::Span<const TensorBytes> variables,
      absl::StatusOr<std::unique_ptr<VariableStore>> store, Ready* ready);

  // A pull: answered now (0, `*answer` set) or held (its ticket; `*done`
  // moved into the waiting pulls).
  uint64_t Pull(int64_t min_step, int worker_id, int64_t generation,
                PullDone* done, absl::StatusOr<Snapshot>* answer);
  bool CancelPull(uint64_t ticket) { return pulls_.Cancel(ticket); }

  // Pushes. A refusal counts (`refused`); CountRefused for one the front
  // made (the scan of the values).
  void CountRefused() { ++counters_.refused; }
  // A whole push decided at once (Push on a lone shard, DecidePush).
  absl::Status DecideWhole(int worker_id, int64_t step,
                           absl::Span<const TensorBytes> gradients,
                           int64_t generation, const DataChunkRef* chunk,
                           uint64_t push_id, PushReply* reply, Ready* ready);
  // Push of several shards and PushPart: the checked data `floats` staged.
  absl::Status Stage(int worker_id, int64_t step,
                     absl::Span<const TensorBytes> gradients,
                     std::vector<StagedGradient>* floats, int64_t generation,
                     const DataChunkRef* chunk, uint64_t push_id, bool whole,
                     PushReply* reply, Ready* ready);
  absl::Status Commit(int worker_id, int64_t step, int64_t generation,
                      uint64_t push_id, const DataChunkRef* chunk,
                      PushReply* reply, Ready* ready);
  // A shard other than 0: shard 0's decisions; `*applied` the last seq.
  absl::Status ApplyDecisions(int64_t generation,
                              absl::Span<const Decision> decisions,
                              Ready* ready, int64_t* applied);

  // Membership.
  absl::StatusOr<MembershipReply> Join(int worker_id, uint64_t incarnation);
  absl::StatusOr<MembershipReply> Leave(int worker_id,
                                        absl::string_view failure,
                                        Ready* ready);
  std::vector<int> ExpireWorkers(absl::Time now, Ready* ready);
  absl::StatusOr<DataChunk> LeaseData(int worker_id, int64_t generation,
                                      const DataChunkRef* give_back);

  // Checkpoints. The store and writer, for the front's reads and flushes
  // without the lock (constant once opened).
  CheckpointStore* checkpoint_store() const { return checkpoints_.store(); }
  CheckpointWriter* checkpoint_writer() const { return checkpoints_.writer(); }
  bool agreeing() const { return checkpoints_.agreeing(); }
  // RestoreAgreed: before the read (`*done`: nothing to read, label -1),
  // then with checkpoint `label` read.
  absl::Status StartRestoreAgreed(int64_t label, bool* done);
  absl::Status RestoreAgreed(const ShardCheckpoint& c, int64_t label);
  absl::Status RequestCheckpoint(int64_t label, bool now);
  // Rollback: before the read, the reply when nothing needs to be read (a
  // duplicate, or the checkpoint the shard awaits), nullopt otherwise; then
  // with checkpoint `label` read.
  absl::StatusOr<std::optional<RollbackReply>> StartRollback(
      int64_t label, int64_t generation, const std::string& context);
  absl::StatusOr<RollbackReply> FinishRollback(const ShardCheckpoint& c,
                                               int64_t label,
                                               int64_t generation,
                                               const std::string& context,
                                               Ready* ready);

  // False when it had shut down already.
  bool Shutdown(absl::string_view reason, Ready* ready);

 private:
  absl::Status CheckOpen() const;
  // ABORTED while awaiting a rollback, or for a generation > 0 that is not
  // the shard's.
  absl::Status CheckGeneration(int64_t generation) const;
  // Initialised and at min_step.
  bool StepReached(int64_t min_step) const {
    return model_.initialized() && model_.step() >= min_step;
  }
  // StepReached, and not held back by the staleness bound.
  bool PullReady(int64_t min_step, int worker_id) const;
  // The current weights for a pull of `worker_id` (-1: none); the worker's
  // lease starts again.
  Snapshot AnswerPull(int worker_id);
  // Moves the waiting pulls that are ready to `ready`.
  void CollectReady(Ready* ready);
  MembershipReply MembershipNow() const {
    return MembershipReply{model_.step(), membership_.LiveWorkers()};
  }

  // The checks of a push that need no gradient: open, initialised, worker
  // id, step.
  absl::Status CheckPush(int worker_id, int64_t step) const;
  // A push's part (or whole push) staged; a complete one decided (lone
  // shard) or kept for shard 0's decision.
  absl::Status StagePart(int worker_id, int64_t step,
                         absl::Span<const TensorBytes> gradients,
                         std::vector<StagedGradient>* floats,
                         const DataChunkRef* chunk, uint64_t push_id,
                         PushReply* reply, Ready* ready);
  // Shard 0 (a lone shard too) on a push whose gradients (layout order)
  // have been matched to the variables: the coordinator's rules decide it,
  // and what they decide is applied and published (TakeDecision).
  absl::Status Decide(int worker_id, int64_t step,
                      const std::vector<const float*>& grads,
                      const DataChunkRef* chunk, uint64_t push_id,
                      PushReply* reply, Ready* ready);
  // The state the coordinator's rules read and change, for one call.
  Coordinator::Shard Rules();
  // A fresh or restored model's step starts: the rules start again.
  void ModelStarted();
  // The model's step advanced: adaptive N's publish time, and the pulls it
  // satisfies move to `ready`.
  void StepAdvanced(Ready* ready);

  // The one apply path (shard_core_decisions.cc). Shard 0 and a lone
  // shard: applies decision `d` of their rules, then publishes it (nowhere
  // on a lone shard).
  void TakeDecision(Decision d, const DecisionInputs& in, Ready* ready);
  // Every shard applies every decision here, in seq order: the update (sync
  // step, async push), the staged copies a decision spends or drops, a
  // worker that left, the chunks trained on, the checkpoint due. Cannot
  // fail: what it needs was found, and the decision checked, before.
  void ApplyDecision(const Decision& d, const DecisionInputs& in, Ready* ready);
  // A shard other than 0: `d`, one of shard 0's decisions, checked (seq,
  // numbers, the staged pushes it names), counted and applied.
  absl::Status FollowDecision(const Decision& d, Ready* ready);
  // The staged gradients `d` names; a sync step's step must be the shard's.
  absl::StatusOr<DecisionInputs> StagedInputs(const Decision& d) const;
  // A new generation (rollback, restore): no decision of the old one counts.
  void RestartDecisions();

  // Takes the worker out of the live set: on shard 0 (or a lone shard) a
  // decision, and the current sync step completes when the gathered
  // gradients are now enough; on the others, here only (shard 0's decision
  // follows).
  void LeaveLive(int worker_id, Ready* ready);
  // The worker leaves the live set here: its parts and chunks go, and its
  // complete pushes unless shard 0 may still decide them.
  void LeaveHere(int worker_id, bool drop_complete, Ready* ready);

  // ShardCheckpointing::Core: the shard's state in a checkpoint.
  bool HasVariablesLocked() const override { return model_.initialized(); }
  void SaveStateLocked(ShardCheckpoint* c) override;
  absl::Status InstallStateLocked(const ShardCheckpoint& c, bool restart,
                                  int64_t generation) override;
  void EnterGenerationLocked(int64_t generation) override;
  uint32_t DigestLocked() const override { return model_.Digest(); }

  bool coordinated() const { return options_.num_shards > 1; }

  const ShardOptions& options_;
  const std::string name_;  // "shard 0", for messages
  // Shard 0 and a lone shard: the coordinator's rules. Null on the other
  // shards, which follow shard 0.
  const std::unique_ptr<Coordinator> coordinator_;
  // The checkpoint store and writer, when to save, the agreement and the
  // rollbacks.
  ShardCheckpointing checkpoints_;
  bool shut_down_ = false;
  std::string shutdown_reason_;
  // The weights, optimizer slots, step, aggregate and async record.
  ShardModel model_;
  // The waiting pulls and the staleness bound's clock.
  WaitingPulls pulls_;
  // The live set, leases, last pushes, incarnations, failures.
  Membership membership_;
  PushCounters counters_;
  // The generation: 1, then each rollback's.
  int64_t generation_ = 1;
  // Pushes in parts, and (several shards) complete pushes awaiting the
  // decision. Shard 0 decides every push it was committed, in order: a
  // shard never drops one that may still be decided.
  PushStage stage_;
  // The data queue, its leases and the ledger's lines.
  ShardDataRoom data_;
  // The decisions of this generation: numbered and published (shard 0), or
  // checked in order (the others).
  DecisionLog log_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_SHARD_CORE_H_
