// The shard's state and the requests that read or change it, but pushes
// and decisions (shard_core_decisions.cc): initialisation, pulls,
// membership, leases of data, status, checkpoints and rollbacks, shutdown.
#include "ps/shard/shard_core.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "ps/shard/push_checks.h"

namespace psgd {
namespace ps {
namespace {

// The worker ids a shard takes: the listed workers, or up to max_workers
// (elastic membership).
int WorkerCapacity(const ShardOptions& o) {
  return std::max(o.total_num_replicas, o.max_workers);
}

}  // namespace

ShardCore::ShardCore(const ShardOptions& options, std::string name,
                     ThreadPool* bulk, DecisionRelay* relay)
    : options_(options),
      name_(std::move(name)),
      // Shard 0 and a lone shard decide; the others follow shard 0.
      coordinator_(options.num_shards > 1 && options.shard_index != 0
                       ? nullptr
                       : std::make_unique<Coordinator>(options)),
      checkpoints_(options, name_),
      model_(options, Coordinator::FirstN(options), WorkerCapacity(options),
             bulk),
      // The staleness bound holds pulls back in async mode only.
      pulls_(options.mode == Mode::kAsync ? options.staleness_bound : -1,
             WorkerCapacity(options)),
      membership_(WorkerCapacity(options)),
      data_(options, name_),
      log_(name_, relay) {}

absl::Status ShardCore::CheckOpen() const {
  if (shut_down_) {
    return absl::CancelledError(
        absl::StrCat(name_, " is shut down: ", shutdown_reason_));
  }
  if (checkpoints_.agreeing()) {
    return absl::UnavailableError(absl::StrCat(
        name_,
        " is agreeing with the other ps tasks on the checkpoint to "
        "restore: try again"));
  }
  return absl::OkStatus();
}

absl::Status ShardCore::CheckGeneration(int64_t generation) const {
  if (checkpoints_.awaiting_rollback()) {
    return absl::AbortedError(
        absl::StrCat(name_, " restored checkpoint step-",
                     checkpoints_.report().label, " (step ", model_.step(),
                     ") when it started and waits for the cluster to "
                     "roll back to it: re-sync"));
  }
  if (generation > 0 && generation != generation_) {
    return absl::AbortedError(
        absl::StrCat(name_, ": request of generation ", generation,
                     ", but the shard is in generation ", generation_,
                     " (the cluster rolled back to a checkpoint): pull again"));
  }
  return absl::OkStatus();
}

std::vector<VariableSpec> ShardCore::Variables() const {
  std::vector<VariableSpec> out;
  if (!model_.initialized()) return out;
  const VariableLayout& layout = model_.store().layout();
  for (int i = 0; i < layout.size(); ++i) out.push_back(layout.Spec(i));
  return out;
}

int64_t ShardCore::MaxTensorAreaBytes(int64_t header, int64_t align) const {
  if (!model_.initialized()) return header;
  const VariableLayout& layout = model_.store().layout();
  return header + layout.num_parameters * int64_t{sizeof(float)} +
         layout.size() * align;
}

ShardStatus ShardCore::Status() const {
  ShardStatus s;
  s.cluster = options_.cluster_name;
  s.shard_index = options_.shard_index;
  s.num_shards = options_.num_shards;
  s.mode = options_.mode;
  model_.AddStatus(&s);
  s.counters = counters_;
  s.live_workers = membership_.LiveWorkers();
  s.workers_expired = membership_.expired();
  s.failed_workers = membership_.Failures();
  // The current step's N (adaptive backup workers change it).
  s.replicas_to_aggregate = model_.StepN(membership_.num_live());
  s.total_num_replicas = options_.total_num_replicas;
  pulls_.AddStatus(&s);
  if (options_.mode == Mode::kSync) {
    for (int w : s.live_workers) {
      if (membership_.last_push_step(w) < s.step) s.waiting_for.push_back(w);
    }
  }
  s.shutting_down = shut_down_;
  s.generation = generation_;
  s.restored_label = checkpoints_.report().label;
  checkpoints_.AddStatus(&s);
  model_.AddMemory(&s.memory);
  s.memory.staged_parts = stage_.PartBytes();
  data_.AddStatus(&s);
  return s;
}

absl::StatusOr<InitializeReply> ShardCore::Initialize(
    absl::Span<const TensorBytes> variables,
    absl::StatusOr<std::unique_ptr<VariableStore>> store, Ready* ready) {
  RETURN_IF_ERROR(CheckOpen());
  InitializeReply reply;
  if (model_.initialized()) {
    RETURN_IF_ERROR(
        Annotate(model_.store().CheckSameVariables(variables), name_ + ": "));
    reply.step = model_.step();
    reply.already_initialized = true;
    return reply;
  }
  if (!store.ok()) return Annotate(store.status(), name_ + ": ");
  RETURN_IF_ERROR(model_.Initialize(*std::move(store), name_));
  ModelStarted();
  checkpoints_.Save(0, *this);
  CollectReady(ready);
  return reply;
}

bool ShardCore::PullReady(int64_t min_step, int worker_id) const {
  return StepReached(min_step) && !pulls_.BoundHolds(worker_id, membership_);
}

ShardCore::Snapshot ShardCore::AnswerPull(int worker_id) {
  // The worker waited here until now: its lease starts again.
  if (worker_id >= 0) membership_.Touch(worker_id, absl::Now());
  return model_.AnswerPull(worker_id);
}

uint64_t ShardCore::Pull(int64_t min_step, int worker_id, int64_t generation,
                         PullDone* done, absl::StatusOr<Snapshot>* answer) {
  absl::Status error = CheckOpen();
  if (error.ok()) error = CheckGeneration(generation);
  if (error.ok() && min_step < 0) {
    error = absl::InvalidArgumentError(absl::StrCat(
        name_, ": pull for min_step ", min_step, ": must be >= 0"));
  }
  const absl::Time now = absl::Now();
  if (error.ok() && worker_id != -1) {
    error = Annotate(membership_.CheckWorkerId(worker_id), name_ + ": pull: ");
    if (error.ok()) membership_.Touch(worker_id, now);
  }
  if (!error.ok()) {
    *answer = std::move(error);
    return 0;
  }
  // PullReady, with the bound looked up once for both answers; the lease
  // was renewed above.
  const bool bound_holds = pulls_.BoundHolds(worker_id, membership_);
  if (!StepReached(min_step) || bound_holds) {
    return pulls_.Hold(min_step, worker_id, std::move(*done), bound_holds, now);
  }
  *answer = model_.AnswerPull(worker_id);
  return 0;
}

void ShardCore::CollectReady(Ready* ready) {
  pulls_.Release(
      [this](int64_t min_step, int worker_id) {
        return PullReady(min_step, worker_id);
      },
      [this](int worker_id) { return AnswerPull(worker_id); }, absl::Now(),
      ready);
}

void ShardCore::ModelStarted() {
  if (coordinator_ == nullptr) return;
  coordinator_->Restart();
  coordinator_->StepStarted(model_.step());
}

void ShardCore::StepAdvanced(Ready* ready) {
  if (coordinator_ != nullptr) coordinator_->StepStarted(model_.step());
  CollectReady(ready);
}

Coordinator::Shard ShardCore::Rules() {
  Coordinator::Shard s;
  s.step = model_.step();
  s.step_n = model_.StepN(membership_.num_live());
  s.membership = &membership_;
  s.counters = &counters_;
  s.aggregator = model_.aggregator();
  s.async = &model_.async();
  s.data = data_.leases();
  s.ledger = data_.has_ledger();
  return s;
}

absl::StatusOr<MembershipReply> ShardCore::Join(int worker_id,
                                                uint64_t incarnation) {
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(
      Annotate(membership_.CheckWorkerId(worker_id), name_ + ": join: "));
  // A worker joins at a step boundary of the cluster's weights, and while
  // the shard awaits the rollback to the checkpoint it restored that step
  // is not decided: a worker not live yet is refused (it re-syncs, which
  // drives the rollback, and joins after it); a live one's join (its
  // lease's heartbeat) changes nothing and stays accepted.
  if (checkpoints_.awaiting_rollback() && !membership_.IsLive(worker_id)) {
    return absl::AbortedError(absl::StrCat(
        name_, ": join of worker ", worker_id,
        " refused: the shard restored checkpoint step-",
        checkpoints_.report().label,
        " and waits for the cluster to roll back to it; join after the "
        "rollback (re-sync)"));
  }
  // A worker that joins can take part after all (started again, fixed).
  membership_.ClearFailure(worker_id);
  // A new process under this id pushes its step anew: what its predecessor
  // staged would meet its parts as second gradients.
  if (membership_.NewIncarnation(worker_id, incarnation)) {
    stage_.DropParts(worker_id);
    data_.Gone(worker_id);  // its chunks will never be pushed
  }
  if (membership_.Join(worker_id, absl::Now())) {
    pulls_.Join(worker_id, membership_.LiveWorkers());
  }
  return MembershipNow();
}

absl::StatusOr<MembershipReply> ShardCore::Leave(int worker_id,
                                                 absl::string_view failure,
                                                 Ready* ready) {
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(
      Annotate(membership_.CheckWorkerId(worker_id), name_ + ": leave: "));
  if (!failure.empty()) membership_.SetFailure(worker_id, std::string(failure));
  LeaveLive(worker_id, ready);
  return MembershipNow();
}

void ShardCore::LeaveLive(int worker_id, Ready* ready) {
  if (coordinator_ == nullptr) {
    // A follower: shard 0 completes the steps, nothing more happens here.
    // The worker's complete pushes stay: shard 0 may have decided them
    // already (its decisions are on their way), and its decision that the
    // worker left comes after them.
    LeaveHere(worker_id, /*drop_complete=*/false, ready);
    return;
  }
  if (!membership_.IsLive(worker_id)) {
    // Not a member: no decision, but what it had staged goes.
    LeaveHere(worker_id, /*drop_complete=*/true, ready);
    return;
  }
  TakeDecision(Coordinator::Left(model_.step(), worker_id), DecisionInputs(),
               ready);
  // A step never waits for a worker that left.
  if (std::optional<Coordinator::Made> made =
          coordinator_->CompleteAfterLeave(Rules())) {
    TakeDecision(std::move(made->decision), made->inputs, ready);
  }
}

void ShardCore::LeaveHere(int worker_id, bool drop_complete, Ready* ready) {
  stage_.DropParts(worker_id);  // a worker that left loses its staged parts
  data_.Gone(worker_id);
  membership_.Leave(worker_id);
  if (drop_complete) stage_.DropComplete(worker_id);
  // A pull does not wait for a worker that left (staleness_bound).
  if (pulls_.bounded()) CollectReady(ready);
}

std::vector<int> ShardCore::ExpireWorkers(absl::Time now, Ready* ready) {
  std::vector<int> expired;
  // With several shards only shard 0 expires leases; the others learn of
  // it from its decisions.
  if (shut_down_ || coordinator_ == nullptr) return expired;
  const std::set<int> pulling = pulls_.Workers();
  for (int id : coordinator_->LeasesRunOut(membership_, now)) {
    if (pulling.count(id) > 0) continue;
    LeaveLive(id, ready);
    membership_.CountExpired();
    expired.push_back(id);
  }
  return expired;
}

absl::StatusOr<DataChunk> ShardCore::LeaseData(int worker_id,
                                               int64_t generation,
                                               const DataChunkRef* give_back) {
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(CheckGeneration(generation));
  RETURN_IF_ERROR(data_.CheckQueue());
  RETURN_IF_ERROR(membership_.CheckWorkerId(worker_id));
  if (!membership_.IsLive(worker_id)) {
    return LeaseRefused(
        LeaseRefusal::kNotLive,
        absl::FailedPreconditionError(absl::StrCat(
            "worker ", worker_id, " is not a live member (join first)")));
  }
  // A lease is a sign of life, answered or not: a worker that waits for the
  // last epoch's chunks keeps its own lease while it asks.
  membership_.Touch(worker_id, absl::Now());
  return data_.Lease(worker_id, give_back, model_.step(),
                     [this]() { return pulls_.Workers(); });
}

absl::Status ShardCore::OpenCheckpoints(
    std::unique_ptr<CheckpointStore> store) {
  return checkpoints_.Open(std::move(store), *this);
}

absl::Status ShardCore::StartRestoreAgreed(int64_t label, bool* done) {
  RETURN_IF_ERROR(checkpoints_.CheckAgreeing());
  *done = label < 0;
  if (*done) checkpoints_.EndAgreement();
  return absl::OkStatus();
}

absl::Status ShardCore::RestoreAgreed(const ShardCheckpoint& c, int64_t label) {
  return checkpoints_.Restore(c, label, *this);
}

absl::Status ShardCore::InstallStateLocked(const ShardCheckpoint& c,
                                           bool restart, int64_t generation) {
  const std::vector<TensorBytes> variables =
      ShardCheckpointing::Variables(*c.weights);
  // A checkpoint of a cluster that kept batch norm's statistics on the
  // servers does not fit one that keeps them on the workers.
  if (absl::Status s = CheckNoLocalStatistics(options_.batch_norm_statistics,
                                              variables, "restore");
      !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  // Everything that can refuse the checkpoint before anything changes.
  ASSIGN_OR_RETURN(std::optional<DataQueue> queue, data_.QueueOf(c));
  RETURN_IF_ERROR(model_.Restore(c, variables, generation));
  ModelStarted();
  // Staged parts of pushes are not saved (nor is the sync aggregate): they
  // belong to weights now undone.
  stage_.ClearParts();
  membership_.RestoreLastPushSteps(c.last_push_step);
  counters_ = c.counters;
  // A new generation: every worker re-syncs and its clock starts at 0.
  pulls_.ResetClocks();
  membership_.set_expired(c.workers_expired);
  if (restart) {
    // The workers that were live: their leases start now.
    const absl::Time now = absl::Now();
    for (int w : c.live_workers) membership_.Join(w, now);
  }
  data_.Install(std::move(queue), c);
  return absl::OkStatus();
}

void ShardCore::SaveStateLocked(ShardCheckpoint* c) {
  c->generation = generation_;
  model_.Save(c);
  c->last_push_step = membership_.LastPushSteps();
  // A worker that pushed for the pending step pushes for it again after a
  // restore, since the pending aggregate is not saved.
  for (int64_t& s : c->last_push_step) s = std::min(s, c->step - 1);
  c->live_workers = membership_.LiveWorkers();
  c->counters = counters_;
  c->workers_expired = membership_.expired();
  data_.Save(c);
}

void ShardCore::EnterGenerationLocked(int64_t generation) {
  generation_ = generation;
  RestartDecisions();
}

absl::Status ShardCore::RequestCheckpoint(int64_t label, bool now) {
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(CheckGeneration(0));
  return checkpoints_.Request(label, now, model_.step(), *this);
}

absl::StatusOr<std::optional<RollbackReply>> ShardCore::StartRollback(
    int64_t label, int64_t generation, const std::string& context) {
  RETURN_IF_ERROR(checkpoints_.CheckRollback(label, generation, context));
  RETURN_IF_ERROR(CheckOpen());
  if (generation <= generation_) {
    return RollbackReply{model_.step(), generation_, false};
  }
  if (checkpoints_.AwaitsRollbackTo(label)) {
    // Already at that checkpoint: it only takes the generation.
    EnterGenerationLocked(generation);
    model_.SetGeneration(generation);
    checkpoints_.RolledBack(generation, label, model_.step(), model_.step());
    return RollbackReply{model_.step(), generation_, true};
  }
  return std::nullopt;
}

absl::StatusOr<RollbackReply> ShardCore::FinishRollback(
    const ShardCheckpoint& c, int64_t label, int64_t generation,
    const std::string& context, Ready* ready) {
  // The file was read without the lock: the generation is checked again.
  RETURN_IF_ERROR(CheckOpen());
  if (generation <= generation_) {
    return RollbackReply{model_.step(), generation_, false};
  }
  const int64_t from = model_.step();
  RETURN_IF_ERROR(
      checkpoints_.RollBackTo(c, label, generation, from, context, *this));
  pulls_.EndAll(absl::AbortedError(absl::StrCat(
                    name_, " rolled back from step ", from,
                    " to checkpoint step-", label, " (step ", model_.step(),
                    ", generation ", generation, "): pull again")),
                ready);
  return RollbackReply{model_.step(), generation_, true};
}

bool ShardCore::Shutdown(absl::string_view reason, Ready* ready) {
  if (shut_down_) return false;
  checkpoints_.SaveUnsaved(model_.step(), *this);
  shut_down_ = true;
  shutdown_reason_ = std::string(reason);
  pulls_.EndAll(CheckOpen(), ready);
  return true;
}

}  // namespace ps
}  // namespace psgd
