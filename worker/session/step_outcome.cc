#include "worker/session/step_outcome.h"

#include <algorithm>

namespace psgd {

absl::string_view StepOutcomeName(StepOutcome outcome) {
  switch (outcome) {
    case StepOutcome::kApplied:
      return "applied";
    case StepOutcome::kAggregated:
      return "aggregated";
    case StepOutcome::kDroppedStale:
      return "dropped_stale";
    case StepOutcome::kDroppedSurplus:
      return "dropped_surplus";
    case StepOutcome::kDropped:
      return "dropped";
    case StepOutcome::kPartlyDropped:
      return "partly_dropped";
    case StepOutcome::kRefusedTooStale:
      return "refused_too_stale";
    case StepOutcome::kRejoined:
      return "rejoined";
    case StepOutcome::kDuplicate:
      return "duplicate";
    case StepOutcome::kRolledBack:
      return "rolled_back";
  }
  return "unknown";
}

StepOutcome OutcomeOfReplies(const ps::PushResult& result, int64_t* staleness) {
  *staleness = 0;
  int applied = 0, aggregated = 0, stale = 0, surplus = 0;
  for (const ps::PushReply& r : result.shards) {
    if (r.skipped) continue;
    *staleness = std::max(*staleness, r.staleness);
    switch (r.outcome) {
      case ps::PushOutcome::kApplied:
        ++applied;
        break;
      case ps::PushOutcome::kAggregated:
        ++aggregated;
        break;
      case ps::PushOutcome::kDroppedStale:
        ++stale;
        break;
      case ps::PushOutcome::kDroppedSurplus:
        ++surplus;
        break;
    }
  }
  const int taken = applied + aggregated, dropped = stale + surplus;
  if (taken > 0 && dropped > 0) return StepOutcome::kPartlyDropped;
  if (applied > 0) return StepOutcome::kApplied;
  if (aggregated > 0) return StepOutcome::kAggregated;
  if (stale > 0 && surplus > 0) return StepOutcome::kDropped;
  return stale > 0 ? StepOutcome::kDroppedStale : StepOutcome::kDroppedSurplus;
}

absl::optional<StepOutcome> OutcomeOfRefusal(const absl::Status& status) {
  switch (ps::PushRefusalOf(status)) {
    case ps::PushRefusal::kTooStale:
      return StepOutcome::kRefusedTooStale;
    case ps::PushRefusal::kAlreadyPushed:
      return StepOutcome::kDuplicate;
    case ps::PushRefusal::kNotLive:
      return StepOutcome::kRejoined;
    case ps::PushRefusal::kFromFuture:  // a worker never pushes ahead: a bug
    case ps::PushRefusal::kNone:
      return absl::nullopt;
  }
  return absl::nullopt;
}

}  // namespace psgd
