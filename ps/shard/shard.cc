#include "ps/shard/shard.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {
namespace {

// The worker ids a shard takes: the listed workers, or up to max_workers
// (elastic membership).
int WorkerCapacity(const ShardOptions& o) {
  return std::max(o.total_num_replicas, o.max_workers);
}

// ShardOptions::bulk_threads, 0 taken as the machine's cores, at most 4.
int BulkThreads(int option) { return option > 0 ? option : MachineThreads(4); }

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterShard>> ParameterShard::Create(
    const ShardOptions& options) {
  RETURN_IF_ERROR(ValidateShardOptions(options));
  std::unique_ptr<ParameterShard> shard(new ParameterShard(options));
  if (options.data_queue_on) {
    MutexLock lock(&shard->mu_);
    RETURN_IF_ERROR(shard->data_.OpenQueue());
  }
  // The other shards keep a ledger of the chunks they applied too.
  if (!options.ledger_file.empty()) {
    ASSIGN_OR_RETURN(shard->ledger_,
                     Ledger::Open(options.ledger_file, shard->name_));
    MutexLock lock(&shard->mu_);
    shard->data_.set_ledger(shard->ledger_.get());
  }
  if (!options.checkpoint.dir.empty()) {
    RETURN_IF_ERROR(shard->OpenCheckpoints());
  }
  return shard;
}

ParameterShard::ParameterShard(const ShardOptions& options)
    : options_(options),
      name_(absl::StrCat("shard ", options.shard_index)),
      bulk_(std::make_unique<ThreadPool>(BulkThreads(options.bulk_threads))),
      // Shard 0 of several shards carries its decisions to the others.
      relay_(options.num_shards > 1 && options.shard_index == 0
                 ? std::make_unique<DecisionRelay>(options.num_shards,
                                                   /*generation=*/1)
                 : nullptr),
      // Shard 0 and a lone shard decide; the others follow shard 0.
      coordinator_(options.num_shards > 1 && options.shard_index != 0
                       ? nullptr
                       : std::make_unique<Coordinator>(options_)),
      checkpoints_(options_, name_),
      model_(options_, Coordinator::FirstN(options_), WorkerCapacity(options_),
             bulk_.get()),
      // The staleness bound holds pulls back in async mode only.
      pulls_(options.mode == Mode::kAsync ? options.staleness_bound : -1,
             WorkerCapacity(options)),
      membership_(WorkerCapacity(options)),
      data_(options_, name_),
      log_(name_, relay_.get()) {}

ParameterShard::~ParameterShard() {
  Shutdown("the shard object is destroyed");
  relay_.reset();  // its senders stop; nothing publishes after Shutdown
}

absl::Status ParameterShard::CheckCluster(absl::string_view cluster) const {
  if (cluster == options_.cluster_name) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("request for cluster '", cluster, "' reached ", name_,
                   " of cluster '", options_.cluster_name, "'"));
}

absl::Status ParameterShard::CheckOpenLocked() const {
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

absl::Status ParameterShard::CheckGenerationLocked(int64_t generation) const {
  if (checkpoints_.awaiting_rollback()) {
    return absl::AbortedError(
        absl::StrCat(name_, " restored checkpoint step-", restore_report_.label,
                     " (step ", model_.step(),
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

std::shared_ptr<const VariableLayout> ParameterShard::Layout() const {
  MutexLock lock(&mu_);
  return model_.shared_layout();
}

std::vector<absl::Status> ParameterShard::CheckPushedTensors(
    absl::Span<const TensorBytes> tensors,
    absl::Span<float* const> copy_to) const {
  return ps::CheckPushedTensors(tensors, copy_to, bulk_pool(),
                                [this]() { return Layout(); });
}

absl::StatusOr<ParameterShard::InitializeReply> ParameterShard::Initialize(
    absl::Span<const TensorBytes> variables) {
  RETURN_IF_ERROR(
      Annotate(CheckNoLocalStatistics(options_.batch_norm_statistics, variables,
                                      "initialize"),
               name_ + ": "));
  // Checked and copied outside the lock; installed under it.
  absl::StatusOr<std::unique_ptr<VariableStore>> store =
      VariableStore::Create(variables);
  Ready ready;
  InitializeReply reply;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (model_.initialized()) {
      RETURN_IF_ERROR(
          Annotate(model_.store().CheckSameVariables(variables), name_ + ": "));
      reply.step = model_.step();
      reply.already_initialized = true;
      return reply;
    }
    if (!store.ok()) return Annotate(store.status(), name_ + ": ");
    RETURN_IF_ERROR(model_.Initialize(*std::move(store), name_));
    ModelStartedLocked();
    checkpoints_.Save(0, *this);
    CollectReadyLocked(&ready);
  }
  RunReady(&ready);
  return reply;
}

bool ParameterShard::StepReadyLocked(int64_t min_step) const {
  return model_.initialized() && model_.step() >= min_step;
}

bool ParameterShard::PullReadyLocked(int64_t min_step, int worker_id) const {
  return StepReadyLocked(min_step) &&
         !pulls_.BoundHolds(worker_id, membership_);
}

ParameterShard::Snapshot ParameterShard::AnswerPullLocked(int worker_id) {
  // The worker waited here until now: its lease starts again.
  if (worker_id >= 0) membership_.Touch(worker_id, absl::Now());
  return model_.AnswerPull(worker_id);
}

uint64_t ParameterShard::PullAsync(int64_t min_step, int worker_id,
                                   PullDone done, int64_t generation) {
  absl::Status error;
  Snapshot snapshot;
  {
    MutexLock lock(&mu_);
    error = CheckOpenLocked();
    if (error.ok()) error = CheckGenerationLocked(generation);
    if (error.ok() && min_step < 0) {
      error = absl::InvalidArgumentError(absl::StrCat(
          name_, ": pull for min_step ", min_step, ": must be >= 0"));
    }
    const absl::Time now = absl::Now();
    if (error.ok() && worker_id != -1) {
      error =
          Annotate(membership_.CheckWorkerId(worker_id), name_ + ": pull: ");
      if (error.ok()) membership_.Touch(worker_id, now);
    }
    if (error.ok()) {
      // PullReadyLocked, with the bound looked up once for both answers;
      // the lease was renewed above.
      const bool bound_holds = pulls_.BoundHolds(worker_id, membership_);
      if (!StepReadyLocked(min_step) || bound_holds) {
        return pulls_.Hold(min_step, worker_id, std::move(done), bound_holds,
                           now);
      }
      snapshot = model_.AnswerPull(worker_id);
    }
  }
  if (error.ok()) {
    done(std::move(snapshot));
  } else {
    done(std::move(error));
  }
  return 0;
}

bool ParameterShard::CancelPull(uint64_t ticket) {
  MutexLock lock(&mu_);
  return pulls_.Cancel(ticket);
}

absl::StatusOr<ParameterShard::Snapshot> ParameterShard::Pull(
    int64_t min_step, int worker_id, absl::Time deadline, int64_t generation) {
  struct Result {
    Notification done;
    absl::StatusOr<Snapshot> value;
  };
  auto result = std::make_shared<Result>();
  const uint64_t ticket = PullAsync(
      min_step, worker_id,
      [result](absl::StatusOr<Snapshot> value) {
        result->value = std::move(value);
        result->done.Notify();
      },
      generation);
  if (!result->done.WaitForNotificationWithDeadline(deadline)) {
    if (CancelPull(ticket)) {
      MutexLock lock(&mu_);
      return absl::DeadlineExceededError(
          absl::StrCat(name_, ": pull for step >= ", min_step,
                       " timed out; the shard is at step ", model_.step(),
                       model_.initialized() ? "" : " and not initialized"));
    }
    result->done.WaitForNotification();  // done is running right now
  }
  return std::move(result->value);
}

absl::StatusOr<PushReply> ParameterShard::Push(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id,
    std::shared_ptr<const void> keep) {
  if (coordinated()) {
    return Stage(worker_id, step, gradients, generation, chunk, push_id,
                 /*whole=*/true, std::move(keep));
  }
  return DecideWhole(worker_id, step, gradients, generation, chunk, push_id);
}

absl::StatusOr<PushReply> ParameterShard::DecideWhole(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id) {
  const std::string context = absl::StrCat(name_, ": push from worker ",
                                           worker_id, " for step ", step, ": ");
  // The scan for NaN, Inf and values too large reads the whole gradient: no
  // lock for it.
  const std::vector<float*> no_copies(gradients.size(), nullptr);
  absl::Status status = FirstNotOk(CheckPushedTensors(gradients, no_copies));
  PushReply reply;
  Ready ready;
  {
    MutexLock lock(&mu_);
    if (status.ok()) status = CheckGenerationLocked(generation);
    if (status.ok()) {
      status = PushLocked(worker_id, step, gradients, chunk, push_id, &reply,
                          &ready);
    }
    if (!status.ok()) ++counters_.refused;
  }
  RunReady(&ready);
  if (!status.ok()) return Annotate(status, context);
  return reply;
}

absl::Status ParameterShard::CheckPushLocked(int worker_id,
                                             int64_t step) const {
  RETURN_IF_ERROR(CheckOpenLocked());
  if (!model_.initialized()) {
    return absl::FailedPreconditionError("the shard is not initialized");
  }
  RETURN_IF_ERROR(membership_.CheckWorkerId(worker_id));
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step, " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status ParameterShard::PushLocked(int worker_id, int64_t step,
                                        absl::Span<const TensorBytes> gradients,
                                        const DataChunkRef* chunk,
                                        uint64_t push_id, PushReply* reply,
                                        Ready* ready) {
  RETURN_IF_ERROR(CheckPushLocked(worker_id, step));
  std::vector<const float*> grads;
  RETURN_IF_ERROR(model_.store().MatchGradients(gradients, &grads));
  RETURN_IF_ERROR(
      DecideLocked(worker_id, step, grads, chunk, reply, ready, push_id));
  // A whole push replaces whatever parts the worker had staged, and on
  // shard 0 the complete pushes it staged and never committed.
  stage_.DropParts(worker_id);
  stage_.DropComplete(worker_id);
  return absl::OkStatus();
}

void ParameterShard::CollectReadyLocked(Ready* ready) {
  // The callbacks run here, on this thread, under the lock.
  pulls_.Release(
      [this](int64_t min_step, int worker_id) {
        mu_.AssertHeld();
        return PullReadyLocked(min_step, worker_id);
      },
      [this](int worker_id) {
        mu_.AssertHeld();
        return AnswerPullLocked(worker_id);
      },
      absl::Now(), ready);
}

void ParameterShard::ModelStartedLocked() {
  if (coordinator_ == nullptr) return;
  coordinator_->Restart();
  coordinator_->StepStarted(model_.step());
}

void ParameterShard::StepAdvancedLocked(Ready* ready) {
  if (coordinator_ != nullptr) coordinator_->StepStarted(model_.step());
  CollectReadyLocked(ready);
}

Coordinator::Shard ParameterShard::RulesLocked() {
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

void ParameterShard::RunReady(Ready* ready) {
  // The ledger first: a worker that gets a step's weights finds the step's
  // lines in the file.
  if (ledger_ != nullptr) ledger_->Write();
  for (auto& [done, value] : *ready) done(std::move(value));
  ready->clear();
}

ParameterShard::MembershipReply ParameterShard::MembershipReplyLocked() const {
  return MembershipReply{model_.step(), membership_.LiveWorkers()};
}

absl::StatusOr<ParameterShard::MembershipReply> ParameterShard::Join(
    int worker_id, uint64_t incarnation) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
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
        " refused: the shard restored checkpoint step-", restore_report_.label,
        " and waits for the cluster to roll back to it; join after the "
        "rollback (re-sync)"));
  }
  // A worker that joins can take part after all (started again, fixed).
  failed_workers_.erase(worker_id);
  if (incarnation != 0) {
    uint64_t& last = incarnations_[worker_id];
    // A new process under this id pushes its step anew: what its
    // predecessor staged would meet its parts as second gradients.
    if (last != incarnation) {
      stage_.DropParts(worker_id);
      data_.Gone(worker_id);  // its chunks will never be pushed
    }
    last = incarnation;
  }
  if (membership_.Join(worker_id, absl::Now())) {
    pulls_.Join(worker_id, membership_.LiveWorkers());
  }
  return MembershipReplyLocked();
}

std::vector<VariableSpec> ParameterShard::Variables() const {
  MutexLock lock(&mu_);
  std::vector<VariableSpec> out;
  if (!model_.initialized()) return out;
  const VariableLayout& layout = model_.store().layout();
  for (int i = 0; i < layout.size(); ++i) out.push_back(layout.Spec(i));
  return out;
}

absl::StatusOr<ParameterShard::MembershipReply> ParameterShard::Leave(
    int worker_id, absl::string_view failure) {
  Ready ready;
  MembershipReply reply;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    RETURN_IF_ERROR(
        Annotate(membership_.CheckWorkerId(worker_id), name_ + ": leave: "));
    if (!failure.empty()) failed_workers_[worker_id] = std::string(failure);
    LeaveLocked(worker_id, &ready);
    reply = MembershipReplyLocked();
  }
  RunReady(&ready);
  return reply;
}

void ParameterShard::LeaveLocked(int worker_id, Ready* ready) {
  if (coordinator_ == nullptr) {
    // A follower: shard 0 completes the steps, nothing more happens here.
    // The worker's complete pushes stay: shard 0 may have decided them
    // already (its decisions are on their way), and its decision that the
    // worker left comes after them.
    LeaveHereLocked(worker_id, /*drop_complete=*/false, ready);
    return;
  }
  if (!membership_.IsLive(worker_id)) {
    // Not a member: no decision, but what it had staged goes.
    LeaveHereLocked(worker_id, /*drop_complete=*/true, ready);
    return;
  }
  TakeDecisionLocked(Coordinator::Left(model_.step(), worker_id),
                     DecisionInputs(), ready);
  // A step never waits for a worker that left.
  if (std::optional<Coordinator::Made> made =
          coordinator_->CompleteAfterLeave(RulesLocked())) {
    TakeDecisionLocked(std::move(made->decision), made->inputs, ready);
  }
}

std::vector<int> ParameterShard::ExpireWorkers(absl::Time now) {
  Ready ready;
  std::vector<int> expired;
  {
    MutexLock lock(&mu_);
    // With several shards only shard 0 expires leases; the others learn of
    // it from its decisions.
    if (shut_down_ || coordinator_ == nullptr) return expired;
    const std::set<int> pulling = pulls_.Workers();
    for (int id : coordinator_->LeasesRunOut(membership_, now)) {
      if (pulling.count(id) > 0) continue;
      LeaveLocked(id, &ready);
      ++workers_expired_;
      expired.push_back(id);
    }
  }
  RunReady(&ready);
  return expired;
}

ParameterShard::Snapshot ParameterShard::LatestWeights() const {
  MutexLock lock(&mu_);
  return model_.current();
}

ShardStatus ParameterShard::Status() const {
  MutexLock lock(&mu_);
  ShardStatus s;
  s.cluster = options_.cluster_name;
  s.shard_index = options_.shard_index;
  s.num_shards = options_.num_shards;
  s.mode = options_.mode;
  model_.AddStatus(&s);
  s.counters = counters_;
  s.live_workers = membership_.LiveWorkers();
  s.workers_expired = workers_expired_;
  s.failed_workers.assign(failed_workers_.begin(), failed_workers_.end());
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
  s.restored_label = restore_report_.label;
  checkpoints_.AddStatus(&s);
  s.memory = MemoryLocked();
  data_.AddStatus(&s);
  return s;
}

absl::Status ParameterShard::CheckKnownShapes(
    absl::Span<const TensorBytes> tensors) const {
  return ps::CheckKnownShapes(tensors, Layout().get());
}

int64_t ParameterShard::MaxTensorAreaBytes(int64_t header,
                                           int64_t align) const {
  MutexLock lock(&mu_);
  if (!model_.initialized()) return header;
  const VariableLayout& layout = model_.store().layout();
  return header + layout.num_parameters * int64_t{sizeof(float)} +
         layout.size() * align;
}

ShardMemory ParameterShard::MemoryLocked() const {
  ShardMemory m;
  model_.AddMemory(&m);
  m.staged_parts = stage_.PartBytes();
  return m;
}

std::vector<float> ParameterShard::CopySlot(absl::string_view name,
                                            int index) const {
  MutexLock lock(&mu_);
  return model_.CopySlot(name, index);
}

void ParameterShard::Shutdown(absl::string_view reason) {
  // Shard 0 lets the other shards apply its last decisions first (the
  // client shuts shard 0 down before the others).
  if (relay_ != nullptr) relay_->AwaitDelivered(absl::Now() + absl::Seconds(5));
  Ready ready;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    checkpoints_.SaveUnsaved(model_.step(), *this);
    shut_down_ = true;
    shutdown_reason_ = std::string(reason);
    shutdown_cv_.SignalAll();
    pulls_.EndAll(CheckOpenLocked(), &ready);
  }
  RunReady(&ready);
}

bool ParameterShard::AwaitShutdown(absl::Time deadline) const {
  MutexLock lock(&mu_);
  return shutdown_cv_.WaitUntil(&mu_, deadline, [this]() {
    mu_.AssertHeld();
    return shut_down_;
  });
}

}  // namespace ps
}  // namespace psgd
