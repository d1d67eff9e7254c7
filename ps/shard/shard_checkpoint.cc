// ParameterShard's side of its checkpoints and rollbacks
// (docs/RELIABILITY.md): its state copied into a checkpoint for the writer
// thread and installed from one, and the lock around the restore and the
// Rollback that makes the whole cluster return to one checkpoint. The
// files, the header, when to save and the rollbacks made are the room's
// (shard_checkpointing.h).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

absl::Status ParameterShard::OpenCheckpoints() {
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointStore> store,
                   ShardCheckpointing::OpenStore(options_));
  MutexLock lock(&mu_);
  return checkpoints_.Open(std::move(store), *this, &restore_report_);
}

std::vector<CompleteCheckpointInfo> ParameterShard::CompleteCheckpoints()
    const {
  CheckpointStore* store = nullptr;
  {
    MutexLock lock(&mu_);
    store = checkpoints_.store();
  }
  if (store == nullptr) return {};
  return store->ListComplete();
}

bool ParameterShard::agreeing() const {
  MutexLock lock(&mu_);
  return checkpoints_.agreeing();
}

absl::Status ParameterShard::RestoreAgreed(int64_t label) {
  CheckpointStore* store = nullptr;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(checkpoints_.CheckAgreeing());
    if (label < 0) {
      checkpoints_.EndAgreement();
      return absl::OkStatus();
    }
    store = checkpoints_.store();
  }
  absl::StatusOr<ShardCheckpoint> c = store->Read(label);
  if (!c.ok()) {
    return Annotate(c.status(), absl::StrCat(name_,
                                             ": restoring the agreed "
                                             "checkpoint step-",
                                             label, ": "));
  }
  MutexLock lock(&mu_);
  return checkpoints_.Restore(*c, label, *this, &restore_report_);
}

bool ParameterShard::HasVariablesLocked() const { return model_.initialized(); }

absl::Status ParameterShard::InstallStateLocked(const ShardCheckpoint& c,
                                                bool restart,
                                                int64_t generation) {
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
  ModelStartedLocked();
  // Staged parts of pushes are not saved (nor is the sync aggregate): they
  // belong to weights now undone.
  stage_.ClearParts();
  membership_.RestoreLastPushSteps(c.last_push_step);
  counters_ = c.counters;
  // A new generation: every worker re-syncs and its clock starts at 0.
  pulls_.ResetClocks();
  workers_expired_ = c.workers_expired;
  restore_report_.digest = model_.Digest();
  if (restart) {
    // The workers that were live: their leases start now.
    const absl::Time now = absl::Now();
    for (int w : c.live_workers) membership_.Join(w, now);
  }
  data_.Install(std::move(queue), c);
  return absl::OkStatus();
}

void ParameterShard::SaveStateLocked(ShardCheckpoint* c) {
  c->generation = generation_;
  model_.Save(c);
  c->last_push_step = membership_.LastPushSteps();
  // A worker that pushed for the pending step pushes for it again after a
  // restore, since the pending aggregate is not saved.
  for (int64_t& s : c->last_push_step) s = std::min(s, c->step - 1);
  c->live_workers = membership_.LiveWorkers();
  c->counters = counters_;
  c->workers_expired = workers_expired_;
  data_.Save(c);
}

void ParameterShard::EnterGenerationLocked(int64_t generation) {
  generation_ = generation;
  RestartDecisionsLocked();
}

absl::Status ParameterShard::RequestCheckpoint(int64_t label, bool now) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  RETURN_IF_ERROR(CheckGenerationLocked(0));
  return checkpoints_.Request(label, now, model_.step(), *this);
}

void ParameterShard::FlushCheckpoints() {
  CheckpointWriter* writer = nullptr;
  {
    MutexLock lock(&mu_);
    writer = checkpoints_.writer();
  }
  if (writer != nullptr) writer->Flush();
}

absl::StatusOr<ParameterShard::RollbackReply> ParameterShard::Rollback(
    int64_t label, int64_t generation) {
  const std::string context =
      absl::StrCat(name_, ": rollback to checkpoint step-", label,
                   " (generation ", generation, "): ");
  CheckpointStore* store = nullptr;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(checkpoints_.CheckRollback(label, generation, context));
    RETURN_IF_ERROR(CheckOpenLocked());
    if (generation <= generation_) {
      return RollbackReply{model_.step(), generation_, false};
    }
    if (checkpoints_.AwaitsRollbackTo(label, restore_report_.label)) {
      // Already at that checkpoint: it only takes the generation.
      EnterGenerationLocked(generation);
      model_.SetGeneration(generation);
      checkpoints_.RolledBack(generation, label, model_.step(), model_.step());
      return RollbackReply{model_.step(), generation_, true};
    }
    store = checkpoints_.store();
  }
  // The file is read without the lock; the generation is checked again.
  absl::StatusOr<ShardCheckpoint> c = store->Read(label);
  if (!c.ok()) return Annotate(c.status(), context);
  Ready ready;
  RollbackReply reply;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (generation <= generation_) {
      return RollbackReply{model_.step(), generation_, false};
    }
    const int64_t from = model_.step();
    RETURN_IF_ERROR(
        checkpoints_.RollBackTo(*c, label, generation, from, context, *this));
    const absl::Status aborted = absl::AbortedError(
        absl::StrCat(name_, " rolled back from step ", from,
                     " to checkpoint step-", label, " (step ", model_.step(),
                     ", generation ", generation, "): pull again"));
    pulls_.EndAll(aborted, &ready);
    reply = RollbackReply{model_.step(), generation_, true};
  }
  RunReady(&ready);
  return reply;
}

}  // namespace ps
}  // namespace psgd
