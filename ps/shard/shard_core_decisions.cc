// Pushes and decisions (docs/PS.md, "One decision per push", "Pushes in
// parts"). Shard 0, and a lone shard, decide a push by the coordinator's
// rules (Decide, over Coordinator::Decide) when it arrives whole (lone), or
// when the worker commits it once every shard has staged it (Commit); what
// they decide is applied through the one apply path (ApplyDecision) and the
// decision log publishes it to the relay. The other shards check the
// decisions they are sent (ApplyDecisions: the log's order and numbers,
// then the pushes they staged) and apply them through the same path.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard_core.h"

namespace psgd {
namespace ps {

absl::Status ShardCore::CheckPush(int worker_id, int64_t step) const {
  RETURN_IF_ERROR(CheckOpen());
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

absl::Status ShardCore::DecideWhole(int worker_id, int64_t step,
                                    absl::Span<const TensorBytes> gradients,
                                    int64_t generation,
                                    const DataChunkRef* chunk, uint64_t push_id,
                                    PushReply* reply, Ready* ready) {
  absl::Status status = CheckGeneration(generation);
  if (status.ok()) status = CheckPush(worker_id, step);
  std::vector<const float*> grads;
  if (status.ok()) status = model_.store().MatchGradients(gradients, &grads);
  if (status.ok()) {
    status = Decide(worker_id, step, grads, chunk, push_id, reply, ready);
  }
  if (!status.ok()) {
    CountRefused();
    return status;
  }
  // A whole push replaces whatever parts the worker had staged, and on
  // shard 0 the complete pushes it staged and never committed.
  stage_.DropParts(worker_id);
  stage_.DropComplete(worker_id);
  return absl::OkStatus();
}

absl::Status ShardCore::Stage(int worker_id, int64_t step,
                              absl::Span<const TensorBytes> gradients,
                              std::vector<StagedGradient>* floats,
                              int64_t generation, const DataChunkRef* chunk,
                              uint64_t push_id, bool whole, PushReply* reply,
                              Ready* ready) {
  absl::Status status = CheckGeneration(generation);
  if (status.ok() && whole) {
    // A whole push replaces whatever parts the worker had staged.
    status = CheckPush(worker_id, step);
    if (status.ok()) stage_.DropParts(worker_id);
  }
  if (status.ok()) {
    status = StagePart(worker_id, step, gradients, floats, chunk, push_id,
                       reply, ready);
  }
  if (status.ok() && whole && stage_.DropParts(worker_id)) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "the push has gradients for ", gradients.size(), " of the ",
        model_.store().layout().size(), " variables of the shard"));
  }
  if (!status.ok()) CountRefused();
  return status;
}

absl::Status ShardCore::StagePart(int worker_id, int64_t step,
                                  absl::Span<const TensorBytes> gradients,
                                  std::vector<StagedGradient>* floats,
                                  const DataChunkRef* chunk, uint64_t push_id,
                                  PushReply* reply, Ready* ready) {
  RETURN_IF_ERROR(CheckPush(worker_id, step));
  // With several shards, shard 0 makes the refusals its decision would make
  // before it stages the push. The others check that the worker is live
  // and the step not from the future; whether the worker pushed for that
  // step before is shard 0's to say (a shard's step tag may lag in async
  // mode, where a pull does not wait for the decisions on their way).
  if (coordinated()) {
    if (coordinator_ != nullptr) {
      RETURN_IF_ERROR(coordinator_->CheckDecidable(Rules(), worker_id, step));
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
            return model_.store().MatchGradient(g);
          },
          floats));
  if (!complete.has_value() || coordinated()) {
    reply->staged = true;
    reply->step = model_.step();
  }
  if (!complete.has_value()) {
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
    reply->reason =
        absl::StrCat("staged for step ", step,
                     options_.shard_index == 0 ? ": the commit decides it"
                                               : ": shard 0 decides it");
    return absl::OkStatus();
  }
  // A lone shard: the decision goes nowhere, and names no staged push.
  return Decide(worker_id, step, complete->Gradients(), chunk, /*push_id=*/0,
                reply, ready);
}

absl::Status ShardCore::Commit(int worker_id, int64_t step, int64_t generation,
                               uint64_t push_id, const DataChunkRef* chunk,
                               PushReply* reply, Ready* ready) {
  absl::Status status = CheckGeneration(generation);
  if (status.ok()) status = CheckPush(worker_id, step);
  if (status.ok() && (!coordinated() || coordinator_ == nullptr)) {
    status = absl::FailedPreconditionError(
        "only shard 0 of a cluster of several shards decides pushes");
  }
  const StagedPush* kept = stage_.FindComplete(worker_id, push_id);
  if (status.ok() && (kept == nullptr || kept->step != step ||
                      kept->generation != generation_)) {
    status = PushRefused(PushRefusal::kNotStaged,
                         absl::StrCat("push ", push_id,
                                      " is not staged here complete for that "
                                      "step"));
  }
  if (status.ok()) {
    // The worker's pushes staged before this one were never committed.
    const StagedPush staged = *stage_.TakeComplete(worker_id, push_id);
    status = Decide(worker_id, step, staged.Gradients(), chunk, push_id, reply,
                    ready);
  }
  if (!status.ok()) CountRefused();
  return status;
}

absl::Status ShardCore::Decide(int worker_id, int64_t step,
                               const std::vector<const float*>& grads,
                               const DataChunkRef* chunk, uint64_t push_id,
                               PushReply* reply, Ready* ready) {
  std::optional<Coordinator::Made> made;
  const absl::Status status = coordinator_->Decide(
      Rules(), worker_id, step, grads, chunk, push_id, reply, &made);
  if (made.has_value()) {
    TakeDecision(std::move(made->decision), made->inputs, ready);
  }
  reply->step = model_.step();
  return status;
}

absl::Status ShardCore::ApplyDecisions(int64_t generation,
                                       absl::Span<const Decision> decisions,
                                       Ready* ready, int64_t* applied) {
  absl::Status status = CheckOpen();
  if (status.ok() && (!coordinated() || coordinator_ != nullptr)) {
    status = absl::FailedPreconditionError(
        absl::StrCat(name_,
                     " takes no decisions: only shards other than 0 of a "
                     "cluster of several shards do"));
  }
  if (status.ok() && !model_.initialized()) {
    status = absl::FailedPreconditionError(
        absl::StrCat(name_, " is not initialized"));
  }
  if (status.ok()) status = CheckGeneration(generation > 0 ? generation : -1);
  for (size_t i = 0; status.ok() && i < decisions.size(); ++i) {
    status = FollowDecision(decisions[i], ready);
  }
  *applied = log_.last();
  return status;
}

absl::Status ShardCore::FollowDecision(const Decision& d, Ready* ready) {
  ASSIGN_OR_RETURN(const bool next, log_.IsNext(d));
  if (!next) return absl::OkStatus();  // a repeat: applied already
  RETURN_IF_ERROR(log_.CheckNumbers(d, membership_));
  ASSIGN_OR_RETURN(const DecisionInputs in, StagedInputs(d));
  // The push counters follow shard 0's decisions (it counted them as it
  // made them).
  CountDecision(d, &counters_);
  ApplyDecision(d, in, ready);
  log_.Applied(d);
  ++counters_.decisions_applied;
  return absl::OkStatus();
}

absl::StatusOr<DecisionInputs> ShardCore::StagedInputs(
    const Decision& d) const {
  DecisionInputs in;
  if (d.kind == Decision::Kind::kDropped || d.kind == Decision::Kind::kLeft) {
    return in;  // no gradient
  }
  // The staged gradients of the decision's pushes, all found before
  // anything changes.
  for (size_t k = 0; k < d.workers.size(); ++k) {
    const StagedPush* kept = stage_.FindComplete(d.workers[k], d.push_ids[k]);
    if (kept == nullptr || kept->generation != generation_) {
      return log_.Refuse(d, absl::StrCat("worker ", d.workers[k], "'s push ",
                                         d.push_ids[k], " is not staged here"));
    }
    in.pushes.push_back(kept->Gradients());
    in.arrivals.push_back(kept->arrival);
    if (k == 0) in.step = kept->step;
  }
  if (d.kind == Decision::Kind::kSyncStep && d.step != model_.step()) {
    return log_.Refuse(d, absl::StrCat("the shard is at step ", model_.step()));
  }
  return in;
}

void ShardCore::RestartDecisions() {
  log_.Restart(generation_);
  if (coordinator_ != nullptr) coordinator_->ClearStep();
  stage_.ClearComplete();
}

void ShardCore::TakeDecision(Decision d, const DecisionInputs& in,
                             Ready* ready) {
  ApplyDecision(d, in, ready);
  log_.Publish(std::move(d));
}

void ShardCore::ApplyDecision(const Decision& d, const DecisionInputs& in,
                              Ready* ready) {
  switch (d.kind) {
    case Decision::Kind::kDropped:
      // Shard 0 did not take the push: its staged copy goes (it may be gone
      // already: taken by shard 0's commit, refused here too, or replaced,
      // and a lone shard stages none). A push dropped as stale or surplus
      // takes every push of its worker staged before it along (never
      // committed: shard 0 dropped them at this push's commit, as for a
      // push it takes); a refused one goes alone: it may be a second push
      // for a step whose aggregate still holds the worker's first.
      if (d.dropped == Decision::Dropped::kRefused) {
        stage_.DropOneComplete(d.workers[0], d.push_ids[0]);
      } else {
        stage_.TakeComplete(d.workers[0], d.push_ids[0]);
      }
      return;
    case Decision::Kind::kLeft:
      // After every decision about the worker's pushes: what it still has
      // staged was never committed.
      LeaveHere(d.workers[0], /*drop_complete=*/true, ready);
      return;
    case Decision::Kind::kSyncStep:
      model_.ApplySyncStep(in, d.lr_scale, d.replicas_next);
      for (int w : d.workers) membership_.RecordPush(w, d.step);
      break;
    case Decision::Kind::kAsyncPush:
      membership_.RecordPush(d.workers[0], in.step);
      // Before the pulls the update satisfies are collected: their
      // staleness bound reads the clocks.
      pulls_.Tick(d.workers[0]);
      model_.ApplyAsyncPush(d.workers[0], in, d.lr_scale, d.staleness);
      break;
  }
  StepAdvanced(ready);
  // The pushes staged here are spent, and so is every push of their workers
  // staged before them (never committed: shard 0 cannot name them any more).
  for (size_t k = 0; k < in.arrivals.size(); ++k) {
    stage_.DropCompleteThrough(d.workers[k], in.arrivals[k]);
  }
  // The data chunks the update trained on: done in the queue that handed
  // them out (shard 0's), else in this shard's ledger from the decision.
  data_.Applied(model_.step(), d.chunks);
  // After the counters, so that they are in it.
  checkpoints_.MaybeSave(model_.step(), *this);
}

}  // namespace ps
}  // namespace psgd
