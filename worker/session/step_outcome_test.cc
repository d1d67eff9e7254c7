#include "worker/session/step_outcome.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace psgd {
namespace {

ps::PushReply Reply(ps::PushOutcome outcome, int64_t staleness = 0) {
  ps::PushReply r;
  r.outcome = outcome;
  r.staleness = staleness;
  return r;
}

ps::PushReply Skipped() {
  ps::PushReply r;
  r.outcome = ps::PushOutcome::kDroppedStale;  // ignored: skipped
  r.staleness = 99;
  r.skipped = true;
  return r;
}

StepOutcome Of(std::vector<ps::PushReply> replies, int64_t* staleness) {
  ps::PushResult result;
  result.shards = std::move(replies);
  return OutcomeOfReplies(result, staleness);
}

TEST_CASE("the push's one decision is its outcome") {
  using O = ps::PushOutcome;
  int64_t st = -1;
  CHECK(Of({Reply(O::kApplied), Reply(O::kApplied)}, &st) ==
        StepOutcome::kApplied);
  CHECK(Of({Reply(O::kAggregated), Reply(O::kAggregated)}, &st) ==
        StepOutcome::kAggregated);
  CHECK(Of({Reply(O::kDroppedStale), Reply(O::kDroppedStale)}, &st) ==
        StepOutcome::kDroppedStale);
  CHECK(Of({Reply(O::kDroppedSurplus)}, &st) == StepOutcome::kDroppedSurplus);
}

TEST_CASE("skipped shards do not count") {
  using O = ps::PushOutcome;
  int64_t st = -1;
  CHECK(Of({Skipped(), Reply(O::kApplied, 5), Reply(O::kApplied, 5)}, &st) ==
        StepOutcome::kApplied);
  CHECK(st == 5);
  CHECK(Of({Skipped(), Reply(O::kAggregated, 0)}, &st) ==
        StepOutcome::kAggregated);
  CHECK(st == 0);
}

TEST_CASE("refusals are told apart by their typed reason, not their text") {
  CHECK(OutcomeOfRefusal(ps::PushRefused(ps::PushRefusal::kTooStale, "x")) ==
        StepOutcome::kRefusedTooStale);
  CHECK(OutcomeOfRefusal(ps::PushRefused(ps::PushRefusal::kAlreadyPushed,
                                         "x")) == StepOutcome::kDuplicate);
  CHECK(OutcomeOfRefusal(ps::PushRefused(ps::PushRefusal::kNotLive, "x")) ==
        StepOutcome::kRejoined);
  // A commit whose staged push shard 0 dropped with the worker's lease.
  CHECK(OutcomeOfRefusal(ps::PushRefused(ps::PushRefusal::kNotStaged, "x")) ==
        StepOutcome::kRejoined);
  CHECK_FALSE(
      OutcomeOfRefusal(ps::PushRefused(ps::PushRefusal::kFromFuture, "x"))
          .has_value());
  // The old messages without the typed reason are not refusals any more.
  CHECK_FALSE(OutcomeOfRefusal(
                  absl::FailedPreconditionError("beyond the staleness bound 2"))
                  .has_value());
  CHECK_FALSE(OutcomeOfRefusal(absl::UnavailableError("down")).has_value());
  CHECK_FALSE(OutcomeOfRefusal(absl::OkStatus()).has_value());
}

TEST_CASE("every outcome has its own name") {
  std::set<std::string> names;
  for (StepOutcome o : kAllStepOutcomes) {
    names.insert(std::string(StepOutcomeName(o)));
  }
  CHECK(names.size() == std::size(kAllStepOutcomes));
  CHECK(names.count("unknown") == 0);
}

}  // namespace
}  // namespace psgd
