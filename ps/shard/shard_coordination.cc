// One decision per push across every shard (docs/PS.md, "One decision per
// push"): shard 0 decides the pushes staged on every shard when the workers
// commit them; the other shards check the decisions it sends them and apply
// them through the one apply path (shard_apply.cc) to the gradients they
// staged.
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
    if (status.ok() && store_ == nullptr) {
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
  RETURN_IF_ERROR(CheckDecisionLocked(d));
  ASSIGN_OR_RETURN(const DecisionInputs in, StagedInputsLocked(d));
  // The push counters follow shard 0's decisions (it counted them as it
  // made them).
  CountDecisionLocked(d);
  ApplyDecisionLocked(d, in, ready);
  log_.Applied(d);
  ++counters_.decisions_applied;
  return absl::OkStatus();
}

absl::Status ParameterShard::RefuseDecision(const Decision& d,
                                            absl::string_view why) const {
  return absl::FailedPreconditionError(
      absl::StrCat(name_, ": decision ", d.seq, " (", DecisionKindName(d.kind),
                   " of step ", d.step, "): ", why));
}

absl::Status ParameterShard::CheckDecisionLocked(const Decision& d) const {
  if (d.workers.empty() || d.workers.size() != d.push_ids.size()) {
    return RefuseDecision(d, "names no push");
  }
  for (int w : d.workers) {
    if (absl::Status s = membership_.CheckWorkerId(w); !s.ok()) {
      return RefuseDecision(d, s.message());
    }
  }
  // Every number in range, as shard 0's rules make them: a step's scale is
  // count / N with count at most the workers (1 otherwise), staleness is a
  // difference of steps, N of the next step one of 1 .. the workers.
  const int workers = membership_.total_num_replicas();
  if (!(std::isfinite(d.lr_scale) && d.lr_scale > 0 &&
        d.lr_scale <= std::max(1, workers))) {
    return RefuseDecision(d, absl::StrCat("lr_scale ", d.lr_scale,
                                          " is not a finite number in (0, ",
                                          std::max(1, workers), "]"));
  }
  if (d.staleness < 0) {
    return RefuseDecision(
        d, absl::StrCat("staleness ", d.staleness, " is negative"));
  }
  if (d.replicas_next < 0 || d.replicas_next > workers) {
    return RefuseDecision(
        d, absl::StrCat("replicas_next ", d.replicas_next,
                        " is not 0 (none) or N in 1..", workers));
  }
  if (static_cast<int>(d.workers.size()) > workers ||
      (d.kind != Decision::Kind::kSyncStep && d.workers.size() != 1)) {
    return RefuseDecision(d,
                          absl::StrCat("names ", d.workers.size(), " pushes"));
  }
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
      return RefuseDecision(
          d, absl::StrCat("worker ", d.workers[k], "'s push ", d.push_ids[k],
                          " is not staged here"));
    }
    in.pushes.push_back(kept->Gradients());
    in.arrivals.push_back(kept->arrival);
    if (k == 0) in.step = kept->step;
  }
  if (d.kind == Decision::Kind::kSyncStep && d.step != step_) {
    return RefuseDecision(d, absl::StrCat("the shard is at step ", step_));
  }
  return in;
}

void ParameterShard::CountDecisionLocked(const Decision& d) {
  switch (d.kind) {
    case Decision::Kind::kSyncStep:
      counters_.aggregated += static_cast<int64_t>(d.workers.size()) - 1;
      ++counters_.applied;
      break;
    case Decision::Kind::kAsyncPush:
      ++counters_.applied;
      break;
    case Decision::Kind::kLeft:
      break;
    case Decision::Kind::kDropped:
      switch (d.dropped) {
        case Decision::Dropped::kStale:
          ++counters_.dropped_stale;
          break;
        case Decision::Dropped::kSurplus:
          ++counters_.dropped_surplus;
          break;
        case Decision::Dropped::kRefusedTooStale:
          ++counters_.refused_too_stale;
          ++counters_.refused;
          break;
        case Decision::Dropped::kRefused:
          ++counters_.refused;
          break;
      }
      break;
  }
}

}  // namespace ps
}  // namespace psgd
