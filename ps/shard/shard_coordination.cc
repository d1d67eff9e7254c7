// Decisions (docs/PS.md, "One decision per push"). Shard 0, and a lone
// shard, decide a push by the coordinator's rules (DecideLocked, here, over
// Coordinator::Decide) when it arrives whole (lone), or when the worker
// commits it once every shard has staged it (Commit); what they decide is
// applied through the one apply path (shard_apply.cc) and the decision log
// publishes it to the relay. The other shards check the decisions they are
// sent (ApplyDecisions: the log's order and numbers, then the pushes they
// staged) and apply them through the same path.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {

absl::StatusOr<PushReply> ParameterShard::Commit(int worker_id, int64_t step,
                                                 int64_t generation,
                                                 uint64_t push_id,
                                                 const DataChunkRef* chunk) {
  const std::string context = absl::StrCat(
      name_, ": commit of worker ", worker_id, "'s push for step ", step, ": ");
  AwaitRelayBacklog();
  PushReply reply;
  Ready ready;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    status = CheckGenerationLocked(generation);
    if (status.ok()) status = CheckPushLocked(worker_id, step);
    if (status.ok() && (!coordinated() || follower())) {
      status = absl::FailedPreconditionError(
          "only shard 0 of a cluster of several shards decides pushes");
    }
    const StagedPush* kept = stage_.FindComplete(worker_id, push_id);
    if (status.ok() && (kept == nullptr || kept->step != step ||
                        kept->generation != generation_)) {
      status = PushRefused(
          PushRefusal::kNotStaged,
          absl::StrCat("push ", push_id,
                       " is not staged here complete for that step"));
    }
    if (status.ok()) {
      // The worker's pushes staged before this one were never committed.
      const StagedPush staged = *stage_.TakeComplete(worker_id, push_id);
      status = DecideLocked(worker_id, step, staged.Gradients(), chunk, &reply,
                            &ready, push_id);
    }
    if (!status.ok()) ++counters_.refused;
  }
  RunReady(&ready);
  if (!status.ok()) return Annotate(status, context);
  return reply;
}

absl::StatusOr<PushReply> ParameterShard::DecidePush(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, uint64_t push_id, const DataChunkRef* chunk) {
  absl::Status refused;
  if (!coordinated() || follower()) {
    refused = absl::FailedPreconditionError(
        "only shard 0 of a cluster of several shards decides pushes");
  } else if (push_id == 0) {
    refused = absl::InvalidArgumentError(
        "a push to decide needs the push_id the other shards staged it "
        "under");
  }
  if (!refused.ok()) {
    {
      MutexLock lock(&mu_);
      ++counters_.refused;
    }
    return Annotate(
        refused, absl::StrCat(name_, ": push to decide from worker ", worker_id,
                              " for step ", step, ": "));
  }
  AwaitRelayBacklog();
  return DecideWhole(worker_id, step, gradients, generation, chunk, push_id);
}

void ParameterShard::AwaitRelayBacklog() {
  // Flow control: the other shards keep every push until its decision
  // reaches them; a commit waits while too many decisions are on their way
  // (async workers outrun the relay). A shard that does not take them (down,
  // restarting) is not waited for beyond a few seconds.
  if (relay_ != nullptr &&
      !relay_->AwaitBacklogAtMost(kMaxDecisionBacklog,
                                  absl::Now() + absl::Seconds(5))) {
    spdlog::warn("{}: {} decisions have not reached every shard for 5 s", name_,
                 relay_->backlog());
  }
}

absl::Status ParameterShard::DecideLocked(
    int worker_id, int64_t step, const std::vector<const float*>& grads,
    const DataChunkRef* chunk, PushReply* reply, Ready* ready,
    uint64_t push_id) {
  std::optional<Coordinator::Made> made;
  const absl::Status status = coordinator_->Decide(
      RulesLocked(), worker_id, step, grads, chunk, push_id, reply, &made);
  if (made.has_value()) {
    TakeDecisionLocked(std::move(made->decision), made->inputs, ready);
  }
  reply->step = model_.step();
  return status;
}

void ParameterShard::ConnectFollowers(DecisionRelay::Deliver deliver) {
  if (relay_ != nullptr) relay_->set_deliver(std::move(deliver));
}

bool ParameterShard::AwaitDecisionsDelivered(absl::Time deadline) {
  return relay_ == nullptr || relay_->AwaitDelivered(deadline);
}

void ParameterShard::RestartDecisionsLocked() {
  log_.Restart(generation_);
  if (coordinator_ != nullptr) coordinator_->ClearStep();
  stage_.ClearComplete();
}

absl::StatusOr<int64_t> ParameterShard::ApplyDecisions(
    int64_t generation, absl::Span<const Decision> decisions) {
  Ready ready;
  absl::Status status;
  int64_t applied = 0;
  {
    MutexLock lock(&mu_);
    status = CheckOpenLocked();
    if (status.ok() && !follower()) {
      status = absl::FailedPreconditionError(
          absl::StrCat(name_,
                       " takes no decisions: only shards other than 0 of a "
                       "cluster of several shards do"));
    }
    if (status.ok() && !model_.initialized()) {
      status = absl::FailedPreconditionError(
          absl::StrCat(name_, " is not initialized"));
    }
    if (status.ok()) {
      status = CheckGenerationLocked(generation > 0 ? generation : -1);
    }
    for (size_t i = 0; status.ok() && i < decisions.size(); ++i) {
      status = FollowDecisionLocked(decisions[i], &ready);
    }
    applied = log_.last();
  }
  RunReady(&ready);
  if (!status.ok()) return status;
  return applied;
}

absl::Status ParameterShard::FollowDecisionLocked(const Decision& d,
                                                  Ready* ready) {
  ASSIGN_OR_RETURN(const bool next, log_.IsNext(d));
  if (!next) return absl::OkStatus();  // a repeat: applied already
  RETURN_IF_ERROR(log_.CheckNumbers(d, membership_));
  ASSIGN_OR_RETURN(const DecisionInputs in, StagedInputsLocked(d));
  // The push counters follow shard 0's decisions (it counted them as it
  // made them).
  CountDecision(d, &counters_);
  ApplyDecisionLocked(d, in, ready);
  log_.Applied(d);
  ++counters_.decisions_applied;
  return absl::OkStatus();
}

absl::StatusOr<DecisionInputs> ParameterShard::StagedInputsLocked(
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

}  // namespace ps
}  // namespace psgd
