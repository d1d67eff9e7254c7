// Pushes in parts (ParameterShard::PushPart; docs/PS.md, "Pushes in parts"):
// a worker's parts are staged until every variable of the shard has its
// gradient, and the complete push is then decided by the same rules as a
// whole one (DecideLocked in shard_coordination.cc, Coordinator::Decide), or
// kept for shard 0's decision.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

absl::StatusOr<PushReply> ParameterShard::PushPart(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id,
    std::shared_ptr<const void> keep) {
  return Stage(worker_id, step, gradients, generation, chunk, push_id,
               /*whole=*/false, std::move(keep));
}

absl::StatusOr<PushReply> ParameterShard::Stage(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id, bool whole,
    std::shared_ptr<const void> keep) {
  const std::string context =
      absl::StrCat(name_, whole ? ": push" : ": push part", " from worker ",
                   worker_id, " for step ", step, ": ");
  // Checked and copied outside the lock: the scan and the copy read the
  // whole part, while other workers' parts are decided.
  absl::Status status;
  if (gradients.empty() && !whole) {
    status = absl::InvalidArgumentError("the part carries no gradient");
  }
  // One pass over the part: the check copies what it reads (no zeroing
  // first), or, where `keep` holds the request's memory, only reads it and
  // the stage keeps the request (no copy).
  std::vector<float*> copy_to;
  std::vector<StagedGradient> floats = StagingFor(gradients, keep, &copy_to);
  if (status.ok()) status = FirstNotOk(CheckPushedTensors(gradients, copy_to));
  PushReply reply;
  Ready ready;
  {
    MutexLock lock(&mu_);
    if (status.ok()) status = CheckGenerationLocked(generation);
    if (status.ok() && whole) {
      // A whole push replaces whatever parts the worker had staged.
      status = CheckPushLocked(worker_id, step);
      if (status.ok()) stage_.DropParts(worker_id);
    }
    if (status.ok()) {
      status = StagePartLocked(worker_id, step, gradients, &floats, chunk,
                               push_id, &reply, &ready);
    }
    if (status.ok() && whole && stage_.DropParts(worker_id)) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "the push has gradients for ", gradients.size(), " of the ",
          model_.store().layout().size(), " variables of the shard"));
    }
    if (!status.ok()) ++counters_.refused;
  }
  RunReady(&ready);
  if (!status.ok()) return Annotate(status, context);
  return reply;
}

absl::Status ParameterShard::StagePartLocked(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    std::vector<StagedGradient>* floats, const DataChunkRef* chunk,
    uint64_t push_id, PushReply* reply, Ready* ready) {
  RETURN_IF_ERROR(CheckPushLocked(worker_id, step));
  // With several shards, shard 0 makes the refusals its decision would make
  // before it stages the push. The others check that the worker is live
  // and the step not from the future; whether the worker pushed for that
  // step before is shard 0's to say (a shard's step tag may lag in async
  // mode, where a pull does not wait for the decisions on their way).
  if (coordinated()) {
    if (coordinator_ != nullptr) {
      RETURN_IF_ERROR(
          coordinator_->CheckDecidable(RulesLocked(), worker_id, step));
    }
    // Shard 0 decides every push it was committed, in order: a shard never
    // drops one that may still be decided. It holds at most
    // kMaxCompletePerWorker of a worker's, and asks for the next later (the
    // worker retries) while that many wait for their decisions.
    const int waiting = stage_.CompleteOf(worker_id);
    if (waiting >= kMaxCompletePerWorker) {
      return absl::UnavailableError(
          absl::StrCat(waiting, " pushes of worker ", worker_id,
                       " wait for shard 0's decisions here: try again"));
    }
    if (coordinator_ == nullptr) {
      RETURN_IF_ERROR(Coordinator::CheckLiveNow(membership_, model_.step(),
                                                worker_id, step));
    }
  }
  const VariableLayout& layout = model_.store().layout();
  ASSIGN_OR_RETURN(
      std::optional<StagedPush> complete,
      stage_.AddPart(
          worker_id, step, generation_, push_id, layout.size(), gradients,
          [this](const TensorBytes& g) {
            mu_.AssertHeld();
            return model_.store().MatchGradient(g);
          },
          floats));
  if (!complete.has_value()) {
    reply->staged = true;
    reply->step = model_.step();
    reply->reason =
        absl::StrCat(stage_.PartsReceived(worker_id), " of ", layout.size(),
                     " gradients staged for step ", step);
    return absl::OkStatus();
  }
  // The last part: the push is decided as one, and the stage is emptied
  // whatever the decision.
  if (coordinated()) {
    // Kept for shard 0's decision (Commit, ApplyDecisions).
    stage_.KeepComplete(worker_id, *std::move(complete));
    ++counters_.staged;
    reply->staged = true;
    reply->step = model_.step();
    reply->reason =
        absl::StrCat("staged for step ", step,
                     options_.shard_index == 0 ? ": the commit decides it"
                                               : ": shard 0 decides it");
    return absl::OkStatus();
  }
  return DecideLocked(worker_id, step, complete->Gradients(), chunk, reply,
                      ready);
}

}  // namespace ps
}  // namespace psgd
