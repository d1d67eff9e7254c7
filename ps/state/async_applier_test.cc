#include "ps/state/async_applier.h"

#include <catch2/catch.hpp>

#include "ps/state/types.h"

namespace psgd {
namespace ps {
namespace {

TEST_CASE("staleness is the shard's step minus the gradient's step") {
  AsyncApplier a(-1, false);
  CHECK(*a.Admit(7, 7) == 0);
  CHECK(*a.Admit(7, 2) == 5);
  CHECK(a.LrScale(5) == 1.0);
}

TEST_CASE("max_push_staleness refuses what exceeds it") {
  AsyncApplier a(2, false);
  CHECK(*a.Admit(10, 8) == 2);
  absl::Status s = a.Admit(10, 7).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(PushRefusalOf(s) == PushRefusal::kTooStale);
  CHECK(PushRefusalOf(a.Admit(10, 8).status()) == PushRefusal::kNone);
  CHECK(s.message().find("staleness 3") != absl::string_view::npos);
  CHECK(s.message().find("max_push_staleness 2") != absl::string_view::npos);
  AsyncApplier zero(0, false);
  CHECK(zero.Admit(3, 3).ok());
  CHECK(!zero.Admit(3, 2).ok());
}

TEST_CASE("the learning rate scaled by 1/staleness, 0 counted as 1") {
  AsyncApplier a(-1, true);
  CHECK(a.LrScale(0) == 1.0);
  CHECK(a.LrScale(1) == 1.0);
  CHECK(a.LrScale(4) == 0.25);
}

TEST_CASE("the histogram counts each staleness, capping the largest") {
  AsyncApplier a(-1, false);
  for (int64_t s : {0, 1, 1, 3, 0, 1}) a.Record(s);
  a.Record(5000);
  a.Record(AsyncApplier::kMaxTrackedStaleness);
  CHECK(a.histogram() ==
        std::map<int64_t, int64_t>{
            {0, 2}, {1, 3}, {3, 1}, {AsyncApplier::kMaxTrackedStaleness, 2}});
}

}  // namespace
}  // namespace ps
}  // namespace psgd
