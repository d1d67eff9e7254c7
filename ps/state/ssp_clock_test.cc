#include "ps/state/ssp_clock.h"

#include <catch2/catch.hpp>
#include <vector>

namespace psgd {
namespace ps {
namespace {

TEST_CASE("SSP: a worker more than bound ahead of the slowest other waits") {
  for (int64_t bound : {0, 1, 3}) {
    SspClock c(bound, 3);
    const std::vector<int> live = {0, 1, 2};
    // Worker 0 runs ahead; 1 and 2 stay at 0.
    for (int64_t k = 1; k <= bound + 2; ++k) {
      c.Tick(0);
      CHECK(c.clock(0) == k);
      CHECK(c.MustWait(0, live) == (k > bound));
      CHECK_FALSE(c.MustWait(1, live));
    }
    // Worker 1 catching up is not enough: 2 is the slowest.
    for (int64_t k = 0; k < bound + 2; ++k) c.Tick(1);
    CHECK(c.MustWait(0, live));
    // Worker 2 pushes once: 0 is still bound + 1 ahead of it; twice: 0 is
    // within the bound.
    c.Tick(2);
    CHECK(c.MustWait(0, live));
    c.Tick(2);
    CHECK_FALSE(c.MustWait(0, live));
  }
}

TEST_CASE("SSP: no bound, no worker, or no other live worker: never waits") {
  SspClock none(-1, 2);
  for (int i = 0; i < 10; ++i) none.Tick(0);
  CHECK_FALSE(none.MustWait(0, {0, 1}));

  SspClock c(0, 2);
  for (int i = 0; i < 10; ++i) c.Tick(0);
  CHECK(c.MustWait(0, {0, 1}));
  CHECK_FALSE(c.MustWait(-1, {0, 1}));  // the evaluator
  CHECK_FALSE(c.MustWait(0, {0}));      // alone
  CHECK_FALSE(c.MustWait(0, {}));       // not even live itself
}

TEST_CASE("SSP: a slow worker that leaves releases the others") {
  SspClock c(1, 3);
  for (int i = 0; i < 5; ++i) c.Tick(0);
  for (int i = 0; i < 4; ++i) c.Tick(1);
  CHECK(c.MustWait(0, {0, 1, 2}));     // 5 > 0 + 1
  CHECK_FALSE(c.MustWait(0, {0, 1}));  // 2 left (or expired): 5 <= 4 + 1
  CHECK(c.MustWait(1, {0, 1, 2}));
}

TEST_CASE("SSP: a joining worker starts at the slowest other live clock") {
  SspClock c(0, 3);
  for (int i = 0; i < 6; ++i) c.Tick(0);
  for (int i = 0; i < 4; ++i) c.Tick(1);
  c.Join(2, {0, 1});
  CHECK(c.clock(2) == 4);
  CHECK_FALSE(c.MustWait(1, {0, 1, 2}));
  // A worker ahead of the others keeps its own clock when it joins again.
  c.Join(0, {0, 1, 2});
  CHECK(c.clock(0) == 6);
  // The first worker to join has no one to follow.
  SspClock fresh(0, 2);
  fresh.Join(0, {});
  CHECK(fresh.clock(0) == 0);
}

TEST_CASE("SSP: Reset puts every clock back to 0") {
  SspClock c(0, 2);
  c.Tick(0);
  c.Tick(0);
  c.Tick(1);
  c.Reset();
  CHECK(c.clock(0) == 0);
  CHECK(c.clock(1) == 0);
  CHECK_FALSE(c.MustWait(0, {0, 1}));
  c.Tick(0);
  CHECK(c.MustWait(0, {0, 1}));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
