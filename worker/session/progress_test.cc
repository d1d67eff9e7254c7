#include "worker/session/progress.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

TEST_CASE("the fraction done is that of the end that comes first") {
  RunEnds ends;
  CHECK(FractionDone(ends, 10, 5.0, 3) == -1.0);  // no known end
  ends.max_steps = 200;
  CHECK(FractionDone(ends, 50, 5.0, 3) == 0.25);
  ends.max_seconds = 10.0;
  CHECK(FractionDone(ends, 50, 5.0, 3) == 0.5);  // the budget is nearer
  ends.total_batches = 4;
  CHECK(FractionDone(ends, 50, 5.0, 3) == 0.75);   // the data nearer still
  CHECK(FractionDone(ends, 500, 50.0, 9) == 1.0);  // never past the end
}

TEST_CASE("progress text: percent and the time left at the pace so far") {
  CHECK(ProgressText(-1.0, 10.0).empty());
  CHECK(ProgressText(0.0, 10.0).empty());
  CHECK(ProgressText(0.25, 10.0) == "25.0% done, ETA 30s");
  CHECK(ProgressText(0.5, 100.0) == "50.0% done, ETA 1m40s");
  CHECK(ProgressText(0.1, 1000.0) == "10.0% done, ETA 2h30m");
  CHECK(ProgressText(1.0, 100.0) == "100.0% done, ETA 0s");
}

}  // namespace
TEST_CASE("a run stops at its last step or when its time is spent") {
  RunEnds ends;
  CHECK(StopReason(ends, 1000, absl::Hours(9)).empty());
  ends.max_steps = 10;
  CHECK(StopReason(ends, 9, absl::Seconds(1)).empty());
  CHECK(StopReason(ends, 11, absl::Seconds(1)) == "reached step 11");
  ends.max_seconds = 90;
  CHECK(StopReason(ends, 3, absl::Seconds(90)) ==
        "the time budget of 1m30s is spent");
}

}  // namespace psgd
