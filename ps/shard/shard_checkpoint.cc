// ParameterShard's checkpoints and rollbacks (docs/RELIABILITY.md): restoring
// at creation, saving a copy of the state for the writer thread, and the
// Rollback that makes the whole cluster return to one checkpoint.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/checkpoint/checkpoint_store.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

absl::Status ParameterShard::OpenCheckpoints() {
  CheckpointStoreOptions o;
  o.dir = options_.checkpoint.dir;
  o.cluster = options_.cluster_name;
  o.shard_index = options_.shard_index;
  o.num_shards = options_.num_shards;
  o.keep = options_.checkpoint.keep;
  o.per_host = options_.checkpoint.per_host;
  o.write_file = options_.checkpoint.write_file;
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointStore> store,
                   CheckpointStore::Open(std::move(o)));
  if (options_.checkpoint.per_host) {
    // Which checkpoint every shard has is agreed over RPC: RestoreAgreed.
    MutexLock lock(&mu_);
    agreeing_ = true;
    checkpoints_ = std::make_unique<CheckpointWriter>(std::move(store));
    return absl::OkStatus();
  }
  absl::StatusOr<ShardCheckpoint> newest =
      store->ReadNewestComplete(&restore_report_.refused);
  if (newest.ok()) {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(
        Annotate(InstallLocked(*newest, /*restart=*/true, newest->generation),
                 absl::StrCat(name_, ": restoring checkpoint step-",
                              newest->label, ": ")));
    generation_ = newest->generation;
    RestartDecisionsLocked();
    awaiting_rollback_ = true;
    restore_report_.label = newest->label;
    restore_report_.step = newest->step;
    restore_report_.generation = newest->generation;
  } else if (!absl::IsNotFound(newest.status())) {
    return newest.status();
  }
  checkpoints_ = std::make_unique<CheckpointWriter>(std::move(store));
  return absl::OkStatus();
}

std::vector<CompleteCheckpointInfo> ParameterShard::CompleteCheckpoints()
    const {
  if (checkpoints_ == nullptr) return {};
  return checkpoints_->store().ListComplete();
}

bool ParameterShard::agreeing() const {
  MutexLock lock(&mu_);
  return agreeing_;
}

absl::Status ParameterShard::RestoreAgreed(int64_t label) {
  {
    MutexLock lock(&mu_);
    if (!agreeing_) {
      return absl::FailedPreconditionError(
          absl::StrCat(name_, " is not agreeing on a checkpoint"));
    }
    if (label < 0) {
      agreeing_ = false;
      return absl::OkStatus();
    }
  }
  absl::StatusOr<ShardCheckpoint> c = checkpoints_->store().Read(label);
  if (!c.ok()) {
    return Annotate(c.status(), absl::StrCat(name_,
                                             ": restoring the agreed "
                                             "checkpoint step-",
                                             label, ": "));
  }
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(Annotate(
      InstallLocked(*c, /*restart=*/true, c->generation),
      absl::StrCat(name_, ": restoring checkpoint step-", label, ": ")));
  generation_ = c->generation;
  RestartDecisionsLocked();
  awaiting_rollback_ = true;
  agreeing_ = false;
  restore_report_.label = c->label;
  restore_report_.step = c->step;
  restore_report_.generation = c->generation;
  return absl::OkStatus();
}

absl::Status ParameterShard::InstallLocked(const ShardCheckpoint& c,
                                           bool restart, int64_t generation) {
  if (c.cluster != options_.cluster_name ||
      c.shard_index != options_.shard_index ||
      c.num_shards != options_.num_shards || c.mode != options_.mode ||
      c.total_num_replicas != options_.total_num_replicas) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint is of shard ", c.shard_index, " of ", c.num_shards,
        " of cluster '", c.cluster, "' (", ModeName(c.mode), ", ",
        c.total_num_replicas, " workers); this is shard ", options_.shard_index,
        " of ", options_.num_shards, " of '", options_.cluster_name, "' (",
        ModeName(options_.mode), ", ", options_.total_num_replicas,
        " workers)"));
  }
  const WeightsSnapshot& w = *c.weights;
  std::vector<TensorBytes> variables;
  for (int i = 0; i < w.layout->size(); ++i) {
    TensorBytes t = FloatTensorBytes(w.layout->names[i], w.layout->shapes[i],
                                     w.weights[i].data());
    t.kind = w.layout->kinds[i];
    if (const absl::optional<SliceOf>& slice = w.layout->slices[i]) {
      t.slice_variable = slice->variable;
      t.slice_part = slice->part;
      t.slice_row_begin = slice->row_begin;
    }
    variables.push_back(t);
  }
  if (store_ != nullptr) RETURN_IF_ERROR(store_->CheckSameVariables(variables));
  // A checkpoint of a cluster that kept batch norm's statistics on the
  // servers does not fit one that keeps them on the workers.
  if (absl::Status s = CheckNoLocalStatistics(variables, "restore"); !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<VariableStore> store,
                   VariableStore::Create(variables, c.step, generation));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   CreateOptimizer(ShardOptimizerOptions(options_),
                                   store->layout().OptimizerSizes(),
                                   store->layout().VariableNames()));
  if (absl::Status s = optimizer->LoadState(c.optimizer); !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  ASSIGN_OR_RETURN(std::optional<DataQueue> queue, data_.QueueOf(c));
  store_ = std::move(store);
  optimizer_ = std::move(optimizer);
  // The pending aggregate of a sync step is not saved: those workers push
  // for the step again (their last_push_step is below it).
  step_ = c.step;
  MakeAggregatorLocked();
  StartStepLocked();
  // Staged parts of pushes are not saved either: they belong to weights now
  // undone.
  stage_.ClearParts();
  membership_.RestoreLastPushSteps(c.last_push_step);
  counters_ = c.counters;
  async_.RestoreHistogram(c.staleness_histogram);
  // A new generation: every worker re-syncs, its clock starts at 0 and its
  // next pull records the snapshot its pushes are compensated against.
  ssp_.Reset();
  dc_.Clear();
  workers_expired_ = c.workers_expired;
  restore_report_.digest =
      StateDigest(*store_->current(), optimizer_->SaveState());
  if (restart) {
    // The workers that were live: their leases start now.
    const absl::Time now = absl::Now();
    for (int w : c.live_workers) membership_.Join(w, now);
    rollbacks_ = c.rollbacks;
  }
  requested_labels_.clear();
  last_saved_step_ = c.step;
  data_.Install(std::move(queue), c);
  return absl::OkStatus();
}

void ParameterShard::SaveLocked(int64_t label) {
  if (checkpoints_ == nullptr || store_ == nullptr || awaiting_rollback_) {
    return;
  }
  auto c = std::make_unique<ShardCheckpoint>();
  c->cluster = options_.cluster_name;
  c->shard_index = options_.shard_index;
  c->num_shards = options_.num_shards;
  c->label = label;
  c->generation = generation_;
  c->mode = options_.mode;
  c->total_num_replicas = options_.total_num_replicas;
  c->saved = absl::Now();
  c->step = step_;
  c->weights = store_->current();  // immutable: shared, not copied
  c->optimizer = optimizer_->SaveState();
  c->last_push_step = membership_.LastPushSteps();
  // A worker that pushed for the pending step pushes for it again after a
  // restore, since the pending aggregate is not saved.
  for (int64_t& s : c->last_push_step) s = std::min(s, step_ - 1);
  c->live_workers = membership_.LiveWorkers();
  c->counters = counters_;
  c->staleness_histogram = async_.histogram();
  c->workers_expired = workers_expired_;
  c->rollbacks = rollbacks_;
  data_.Save(c.get());
  checkpoints_->Save(std::move(c));
  last_saved_step_ = step_;
}

void ParameterShard::MaybeSaveLocked() {
  if (checkpoints_ == nullptr) return;
  const int64_t every = options_.checkpoint.every_steps;
  const bool periodic = every > 0 && step_ % every == 0;
  if (periodic) SaveLocked(step_);
  while (!requested_labels_.empty() && *requested_labels_.begin() <= step_) {
    const int64_t label = *requested_labels_.begin();
    requested_labels_.erase(requested_labels_.begin());
    if (!(periodic && label == step_)) SaveLocked(label);
  }
}

absl::Status ParameterShard::RequestCheckpoint(int64_t label, bool now) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  RETURN_IF_ERROR(CheckGenerationLocked(0));
  if (checkpoints_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_,
                     ": checkpoint requested, but the server has no "
                     "checkpoint directory"));
  }
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": checkpoint requested before Initialize"));
  }
  if (label < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": checkpoint label ", label, " is negative"));
  }
  if (now || step_ >= label) {
    SaveLocked(label);
  } else {
    requested_labels_.insert(label);
  }
  return absl::OkStatus();
}

void ParameterShard::FlushCheckpoints() {
  if (checkpoints_ != nullptr) checkpoints_->Flush();
}

absl::StatusOr<ParameterShard::RollbackReply> ParameterShard::Rollback(
    int64_t label, int64_t generation) {
  const std::string context =
      absl::StrCat(name_, ": rollback to checkpoint step-", label,
                   " (generation ", generation, "): ");
  if (generation < 1 || label < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(context,
                     "the generation must be >= 1 and the label "
                     ">= 0"));
  }
  if (checkpoints_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(context, "the server has no checkpoint directory"));
  }
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (generation <= generation_) {
      return RollbackReply{step_, generation_, false};
    }
    if (awaiting_rollback_ && label == restore_report_.label) {
      // Already at that checkpoint: it only takes the generation.
      generation_ = generation;
      RestartDecisionsLocked();
      awaiting_rollback_ = false;
      store_->SetGeneration(generation);
      rollbacks_.push_back({generation, label, step_, step_});
      checkpoints_->DeleteNewerThan(label);
      return RollbackReply{step_, generation_, true};
    }
  }
  // The file is read without the lock; the generation is checked again.
  absl::StatusOr<ShardCheckpoint> c = checkpoints_->store().Read(label);
  if (!c.ok()) return Annotate(c.status(), context);
  Ready ready;
  RollbackReply reply;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (generation <= generation_) {
      return RollbackReply{step_, generation_, false};
    }
    const int64_t from = step_;
    RETURN_IF_ERROR(
        Annotate(InstallLocked(*c, /*restart=*/false, generation), context));
    generation_ = generation;
    RestartDecisionsLocked();
    awaiting_rollback_ = false;
    rollbacks_.push_back({generation, label, from, step_});
    const absl::Status aborted = absl::AbortedError(absl::StrCat(
        name_, " rolled back from step ", from, " to checkpoint step-", label,
        " (step ", step_, ", generation ", generation, "): pull again"));
    for (auto& [ticket, waiter] : waiters_) {
      ready.emplace_back(std::move(waiter.done), aborted);
    }
    waiters_.clear();
    checkpoints_->DeleteNewerThan(label);
    reply = RollbackReply{step_, generation_, true};
  }
  RunReady(&ready);
  return reply;
}

}  // namespace ps
}  // namespace psgd
