#include "ps/shard/shard_checkpointing.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model_variables.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {

ShardCheckpointing::ShardCheckpointing(const ShardOptions& options,
                                       std::string name)
    : options_(options), name_(std::move(name)) {}

absl::StatusOr<std::unique_ptr<CheckpointStore>> ShardCheckpointing::OpenStore(
    const ShardOptions& options) {
  CheckpointStoreOptions o;
  o.dir = options.checkpoint.dir;
  o.cluster = options.cluster_name;
  o.shard_index = options.shard_index;
  o.num_shards = options.num_shards;
  o.keep = options.checkpoint.keep;
  o.per_host = options.checkpoint.per_host;
  o.write_file = options.checkpoint.write_file;
  return CheckpointStore::Open(std::move(o));
}

absl::Status ShardCheckpointing::Open(std::unique_ptr<CheckpointStore> store,
                                      Core& core) {
  if (options_.checkpoint.per_host) {
    // Which checkpoint every shard has is agreed over RPC: RestoreAgreed.
    agreeing_ = true;
    writer_ = std::make_unique<CheckpointWriter>(std::move(store));
    return absl::OkStatus();
  }
  absl::StatusOr<ShardCheckpoint> newest =
      store->ReadNewestComplete(&report_.refused);
  if (newest.ok()) {
    RETURN_IF_ERROR(Restore(*newest, newest->label, core));
  } else if (!absl::IsNotFound(newest.status())) {
    return newest.status();
  }
  writer_ = std::make_unique<CheckpointWriter>(std::move(store));
  return absl::OkStatus();
}

CheckpointStore* ShardCheckpointing::store() const {
  return writer_ == nullptr ? nullptr : &writer_->store();
}

absl::Status ShardCheckpointing::CheckAgreeing() const {
  if (agreeing_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(name_, " is not agreeing on a checkpoint"));
}

absl::Status ShardCheckpointing::Restore(const ShardCheckpoint& c,
                                         int64_t label, Core& core) {
  RETURN_IF_ERROR(Annotate(
      Install(c, /*restart=*/true, c.generation, core),
      absl::StrCat(name_, ": restoring checkpoint step-", label, ": ")));
  core.EnterGenerationLocked(c.generation);
  awaiting_rollback_ = true;
  agreeing_ = false;
  report_.label = c.label;
  report_.step = c.step;
  report_.generation = c.generation;
  return absl::OkStatus();
}

std::vector<TensorBytes> ShardCheckpointing::Variables(
    const WeightsSnapshot& w) {
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
  return variables;
}

absl::Status ShardCheckpointing::Install(const ShardCheckpoint& c, bool restart,
                                         int64_t generation, Core& core) {
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
  RETURN_IF_ERROR(core.InstallStateLocked(c, restart, generation));
  report_.digest = core.DigestLocked();
  if (restart) rollbacks_ = c.rollbacks;
  requested_labels_.clear();
  last_saved_step_ = c.step;
  return absl::OkStatus();
}

void ShardCheckpointing::Save(int64_t label, Core& core) {
  if (writer_ == nullptr || !core.HasVariablesLocked() || awaiting_rollback_) {
    return;
  }
  auto c = std::make_unique<ShardCheckpoint>();
  c->cluster = options_.cluster_name;
  c->shard_index = options_.shard_index;
  c->num_shards = options_.num_shards;
  c->label = label;
  c->mode = options_.mode;
  c->total_num_replicas = options_.total_num_replicas;
  c->saved = absl::Now();
  core.SaveStateLocked(c.get());
  c->rollbacks = rollbacks_;
  last_saved_step_ = c->step;
  writer_->Save(std::move(c));
}

void ShardCheckpointing::MaybeSave(int64_t step, Core& core) {
  if (writer_ == nullptr) return;
  const int64_t every = options_.checkpoint.every_steps;
  const bool periodic = every > 0 && step % every == 0;
  if (periodic) Save(step, core);
  while (!requested_labels_.empty() && *requested_labels_.begin() <= step) {
    const int64_t label = *requested_labels_.begin();
    requested_labels_.erase(requested_labels_.begin());
    if (!(periodic && label == step)) Save(label, core);
  }
}

void ShardCheckpointing::SaveUnsaved(int64_t step, Core& core) {
  if (last_saved_step_ != step) Save(step, core);
}

absl::Status ShardCheckpointing::Request(int64_t label, bool now, int64_t step,
                                         Core& core) {
  if (writer_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_,
                     ": checkpoint requested, but the server has no "
                     "checkpoint directory"));
  }
  if (!core.HasVariablesLocked()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": checkpoint requested before Initialize"));
  }
  if (label < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": checkpoint label ", label, " is negative"));
  }
  if (now || step >= label) {
    Save(label, core);
  } else {
    requested_labels_.insert(label);
  }
  return absl::OkStatus();
}

absl::Status ShardCheckpointing::CheckRollback(
    int64_t label, int64_t generation, const std::string& context) const {
  if (generation < 1 || label < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(context,
                     "the generation must be >= 1 and the label "
                     ">= 0"));
  }
  if (writer_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(context, "the server has no checkpoint directory"));
  }
  return absl::OkStatus();
}

void ShardCheckpointing::RolledBack(int64_t generation, int64_t label,
                                    int64_t from, int64_t to) {
  awaiting_rollback_ = false;
  rollbacks_.push_back({generation, label, from, to});
  writer_->DeleteNewerThan(label);
}

absl::Status ShardCheckpointing::RollBackTo(const ShardCheckpoint& c,
                                            int64_t label, int64_t generation,
                                            int64_t from,
                                            const std::string& context,
                                            Core& core) {
  RETURN_IF_ERROR(
      Annotate(Install(c, /*restart=*/false, generation, core), context));
  core.EnterGenerationLocked(generation);
  RolledBack(generation, label, from, c.step);
  return absl::OkStatus();
}

void ShardCheckpointing::AddStatus(ShardStatus* s) const {
  s->awaiting_rollback = awaiting_rollback_;
  s->rollbacks = rollbacks_;
  if (writer_ == nullptr) return;
  const CheckpointWriter::Stats c = writer_->stats();
  s->checkpoints_written = c.written;
  s->checkpoint_failures = c.failed;
  s->last_checkpoint_label = c.last_label;
  s->last_complete_checkpoint_label = c.last_complete_label;
  s->last_checkpoint_error = c.last_error;
}

}  // namespace ps
}  // namespace psgd
