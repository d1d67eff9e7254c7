// What became of one step's gradient, as the worker records it: the shards'
// replies folded into one outcome, or the refusal or failure that stopped
// it. A typed value (never compared as text); StepOutcomeName gives the
// word that the metrics and the summary use.
//
// Thread-safety: plain values and pure functions.
#ifndef PSGD_WORKER_SESSION_STEP_OUTCOME_H_
#define PSGD_WORKER_SESSION_STEP_OUTCOME_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "ps/client/ps_client.h"

namespace psgd {

enum class StepOutcome {
  kApplied,          // completed a step on a shard (sync), or applied (async)
  kAggregated,       // joined the step's aggregate on every shard
  kDroppedStale,     // every shard dropped it: from an older step
  kDroppedSurplus,   // every shard dropped it: the step was already full
  kRefusedTooStale,  // async: beyond the servers' staleness bound
  kRejoined,         // the worker was out of the live set; it joined again
  kDuplicate,        // sent again after a failure; the shards had it
  kRolledBack,       // the cluster went back to a checkpoint before it landed
};

// Every outcome, in the order above (for tables and tests).
inline constexpr StepOutcome kAllStepOutcomes[] = {
    StepOutcome::kApplied,         StepOutcome::kAggregated,
    StepOutcome::kDroppedStale,    StepOutcome::kDroppedSurplus,
    StepOutcome::kRefusedTooStale, StepOutcome::kRejoined,
    StepOutcome::kDuplicate,       StepOutcome::kRolledBack,
};

// "applied", "aggregated", "dropped_stale", "dropped_surplus",
// "refused_too_stale", "rejoined", "duplicate",
// "rolled_back".
absl::string_view StepOutcomeName(StepOutcome outcome);

// The outcome of an accepted push: the one decision every shard follows
// (shard 0's with several shards; docs/PS.md, "One decision per push"), read
// from the first shard not skipped, and its staleness in *staleness.
StepOutcome OutcomeOfReplies(const ps::PushResult& result, int64_t* staleness);

// The outcome that a refused push stands for (kRefusedTooStale for the
// staleness bound, kDuplicate for a copy, kRejoined for a worker out of the
// live set or whose staged push shard 0 no longer holds at the commit (its
// lease ran out meanwhile): the caller joins again as a new incarnation),
// or nullopt when `status` is not a refusal the worker goes on from.
absl::optional<StepOutcome> OutcomeOfRefusal(const absl::Status& status);

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_STEP_OUTCOME_H_
