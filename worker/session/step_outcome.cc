#include "worker/session/step_outcome.h"

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
  for (const ps::PushReply& r : result.shards) {
    if (r.skipped) continue;
    *staleness = r.staleness;
    switch (r.outcome) {
      case ps::PushOutcome::kApplied:
        return StepOutcome::kApplied;
      case ps::PushOutcome::kAggregated:
        return StepOutcome::kAggregated;
      case ps::PushOutcome::kDroppedStale:
        return StepOutcome::kDroppedStale;
      case ps::PushOutcome::kDroppedSurplus:
        return StepOutcome::kDroppedSurplus;
    }
  }
  return StepOutcome::kDroppedSurplus;
}

absl::optional<StepOutcome> OutcomeOfRefusal(const absl::Status& status) {
  switch (ps::PushRefusalOf(status)) {
    case ps::PushRefusal::kTooStale:
      return StepOutcome::kRefusedTooStale;
    case ps::PushRefusal::kAlreadyPushed:
      return StepOutcome::kDuplicate;
    case ps::PushRefusal::kNotLive:
    case ps::PushRefusal::kNotStaged:  // its lease ran out and came back
      return StepOutcome::kRejoined;
    case ps::PushRefusal::kFromFuture:  // a worker never pushes ahead: a bug
    case ps::PushRefusal::kNone:
      return absl::nullopt;
  }
  return absl::nullopt;
}

}  // namespace psgd
