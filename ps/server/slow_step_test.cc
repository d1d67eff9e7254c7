#include "ps/server/slow_step.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace ps {
namespace {

ShardStatus Waiting(absl::Time started) {
  ShardStatus s;
  s.mode = Mode::kSync;
  s.initialized = true;
  s.shard_index = 1;
  s.step = 7;
  s.generation = 1;
  s.replicas_to_aggregate = 3;
  s.pending_gradients = 1;
  s.live_workers = {0, 1, 2};
  s.waiting_for = {0, 2};
  s.step_started = started;
  return s;
}

TEST_CASE("a slow sync step names the workers it waits for, once") {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  SlowStepLog log(absl::Seconds(10));
  ShardStatus s = Waiting(t0);
  CHECK(log.Check(s, t0 + absl::Seconds(9)).empty());
  CHECK(log.Check(s, t0 + absl::Seconds(12)) ==
        "shard 1: step 7 has waited 12s with 1 of 3 gradients; waiting for "
        "worker(s) 0,2 (live: 0,1,2)");
  CHECK(log.Check(s, t0 + absl::Seconds(30)).empty());  // said already
  s.step = 8;  // the next step, slow too
  s.step_started = t0 + absl::Seconds(40);
  CHECK(log.Check(s, t0 + absl::Seconds(45)).empty());
  CHECK_FALSE(log.Check(s, t0 + absl::Seconds(51)).empty());
}

TEST_CASE("no word for async, nobody missing, or no threshold") {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const absl::Time late = t0 + absl::Minutes(5);
  ShardStatus s = Waiting(t0);
  s.mode = Mode::kAsync;
  CHECK(SlowStepLog(absl::Seconds(1)).Check(s, late).empty());
  s = Waiting(t0);
  s.waiting_for.clear();
  CHECK(SlowStepLog(absl::Seconds(1)).Check(s, late).empty());
  CHECK(SlowStepLog(absl::ZeroDuration()).Check(Waiting(t0), late).empty());
}

}  // namespace
}  // namespace ps
}  // namespace psgd
