// ParameterShard's async staleness controls (docs/PS.md, "Async mode"): the
// blocking staleness bound (SSP) on pulls, released by the slow worker's
// push, its leave or its lease; DC-ASGD on pushes from each worker's last
// pulled snapshot, which is all it keeps alive; async_beta1 in Adam; and
// what a restore or a rollback does to each (clocks and snapshots start
// again; Adam's m, v, t restored).
#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "ps/shard/shard.h"
#include "ps/state/delay_compensation.h"
#include "ps/testing/checkpoint_test_util.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::FreshDir;
using testing::MakeShard;
using testing::Push;
using testing::ShardPicture;
using testing::TwoVariables;
using testing::Weights;

TwoVariables Gradient(int w, int64_t s) { return testing::ExactGradient(w, s); }
ShardOptions Async(int workers) { return testing::AsyncSgdOptions(workers); }

absl::StatusOr<ParameterShard::Snapshot> PullNow(ParameterShard& shard,
                                                 int worker) {
  return shard.Pull(0, worker, absl::Now() + absl::Milliseconds(50));
}

// A pull of `worker` that waits; *answered turns true when it is answered.
void PullLater(ParameterShard& shard, int worker, std::atomic<bool>* answered) {
  shard.PullAsync(0, worker,
                  [answered](absl::StatusOr<ParameterShard::Snapshot> s) {
                    CHECK(s.ok());
                    *answered = true;
                  });
}

TEST_CASE("staleness bound: a worker too far ahead waits for the slowest") {
  for (int64_t bound : {0, 1}) {
    ShardOptions o = Async(2);
    o.staleness_bound = bound;
    auto shard = MakeShard(o);
    // Worker 0 pushes bound + 1 gradients, worker 1 none.
    for (int64_t s = 0; s <= bound; ++s) {
      REQUIRE(PullNow(*shard, 0).ok());
      REQUIRE(Push(*shard, 0, s, Gradient(0, s)).ok());
    }
    std::atomic<bool> answered{false};
    const absl::Time before_pull = absl::Now();
    PullLater(*shard, 0, &answered);
    CHECK_FALSE(answered);
    CHECK(shard->Status().ssp_blocked_pulls == 1);
    // The slow worker and the evaluator pull at once.
    CHECK(PullNow(*shard, 1).ok());
    CHECK(PullNow(*shard, -1).ok());
    // The slow worker's push releases the fast one.
    REQUIRE(Push(*shard, 1, 0, Gradient(1, 0)).ok());
    const double held_at_most =
        absl::ToDoubleSeconds(absl::Now() - before_pull);
    CHECK(answered);
    ShardStatus s = shard->Status();
    CHECK(s.ssp_blocked_pulls == 1);
    // The time it was blocked counts, and no more than it was held.
    CHECK(s.ssp_blocked_seconds > 0);
    CHECK(s.ssp_blocked_seconds <= held_at_most);
    // A timed-out pull is withdrawn and names the step as before.
    REQUIRE(Push(*shard, 0, bound + 1, Gradient(0, 1)).ok());
    CHECK(absl::IsDeadlineExceeded(PullNow(*shard, 0).status()));
  }
}

TEST_CASE("staleness bound: a slow worker that leaves or expires releases") {
  ShardOptions o = Async(3);
  o.staleness_bound = 0;
  o.worker_lease = absl::Seconds(30);
  auto shard = MakeShard(o);
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0)).ok());
  REQUIRE(Push(*shard, 0, 1, Gradient(0, 1)).ok());
  REQUIRE(Push(*shard, 1, 0, Gradient(1, 0)).ok());
  std::atomic<bool> answered{false};
  PullLater(*shard, 0, &answered);  // 2 > min(1, 0) + 0
  REQUIRE(shard->Leave(2).ok());    // now 2 > 1 + 0: still waits
  CHECK_FALSE(answered);
  // Worker 1 dies: its lease runs out, the waiting worker 0's does not.
  CHECK(shard->ExpireWorkers(absl::Now() + absl::Seconds(60)) ==
        std::vector<int>{1});
  CHECK(answered);
  // A worker that joins again starts at the slowest other live clock (here
  // worker 0's), so it holds no one back for pushes it never made.
  REQUIRE(shard->Join(2).ok());
  CHECK(PullNow(*shard, 0).ok());
  CHECK(PullNow(*shard, 2).ok());
}

TEST_CASE("staleness bound: after a rollback every clock starts at 0") {
  ShardOptions o = Async(2);
  o.staleness_bound = 0;
  o.checkpoint.dir = FreshDir("ssp_rollback");
  auto shard = MakeShard(o);  // saves step 0
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0)).ok());
  REQUIRE(Push(*shard, 0, 1, Gradient(0, 1)).ok());
  CHECK(absl::IsDeadlineExceeded(PullNow(*shard, 0).status()));
  shard->FlushCheckpoints();
  REQUIRE(shard->Rollback(0, 2).ok());
  // Clocks 0 and 0: worker 0 pulls; one push puts it 1 ahead again.
  CHECK(PullNow(*shard, 0).ok());
  REQUIRE(shard->Push(0, 0, Gradient(0, 0).Bytes(), 2).ok());
  CHECK(absl::IsDeadlineExceeded(PullNow(*shard, 0).status()));
  REQUIRE(shard->Push(1, 0, Gradient(1, 0).Bytes(), 2).ok());
  CHECK(PullNow(*shard, 0).ok());
}

// SGD (lr 0.5) on the shard's weights `w` with gradient `g`, DC-ASGD
// compensated against `then` when given: the shard's arithmetic, replayed.
TwoVariables SgdStep(const TwoVariables& w, const TwoVariables& g, float lambda,
                     const TwoVariables* then) {
  TwoVariables c = g;
  if (then != nullptr) {
    CompensateDelay(lambda, 6, g.w.data(), w.w.data(), then->w.data(),
                    c.w.data());
    CompensateDelay(lambda, 2, g.b.data(), w.b.data(), then->b.data(),
                    c.b.data());
  }
  TwoVariables out = w;
  for (int i = 0; i < 6; ++i) out.w[i] = w.w[i] - 0.5f * c.w[i];
  for (int i = 0; i < 2; ++i) out.b[i] = w.b[i] - 0.5f * c.b[i];
  return out;
}

TEST_CASE("DC-ASGD on the shard: against the worker's last pull, bit-exact") {
  ShardOptions o = Async(2);
  o.dc_asgd_lambda = 0.5;
  auto shard = MakeShard(o);
  const TwoVariables w0 = Weights(*shard);
  REQUIRE(PullNow(*shard, 0).ok());
  REQUIRE(PullNow(*shard, 1).ok());
  // Worker 0: its weights did not move, so nothing to compensate.
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0)).ok());
  const TwoVariables w1 = SgdStep(w0, Gradient(0, 0), 0.5f, &w0);
  CHECK(Weights(*shard).w == w1.w);
  // Worker 1 computed from w0 and arrives at w1.
  REQUIRE(Push(*shard, 1, 0, Gradient(1, 0)).ok());
  const TwoVariables w2 = SgdStep(w1, Gradient(1, 0), 0.5f, &w0);
  CHECK(w2.w != SgdStep(w1, Gradient(1, 0), 0.5f, nullptr).w);
  TwoVariables got = Weights(*shard);
  CHECK(got.w == w2.w);
  CHECK(got.b == w2.b);
  // Worker 0 pushes from step 1 without having pulled it: as it came.
  REQUIRE(Push(*shard, 0, 1, Gradient(0, 1)).ok());
  const TwoVariables w3 = SgdStep(w2, Gradient(0, 1), 0.5f, nullptr);
  got = Weights(*shard);
  CHECK(got.w == w3.w);
  CHECK(got.b == w3.b);
  const ShardStatus s = shard->Status();
  CHECK(s.dc_compensated == 2);
  CHECK(s.dc_uncompensated == 1);
}

TEST_CASE("DC-ASGD after a rollback: snapshots forgotten, then as before") {
  ShardOptions o = Async(2);
  o.dc_asgd_lambda = 0.5;
  o.checkpoint.dir = FreshDir("dc_rollback");
  o.checkpoint.every_steps = 2;
  auto shard = MakeShard(o);
  // Two rounds of: both pull, both push (the second one stale by 1).
  auto round = [&](int64_t s, int64_t generation) {
    REQUIRE(shard->Pull(s, 0, absl::Now() + absl::Seconds(1), generation).ok());
    REQUIRE(shard->Pull(s, 1, absl::Now() + absl::Seconds(1), generation).ok());
    REQUIRE(shard->Push(0, s, Gradient(0, s).Bytes(), generation).ok());
    REQUIRE(shard->Push(1, s, Gradient(1, s).Bytes(), generation).ok());
  };
  round(0, 0);  // step 2: saved
  shard->FlushCheckpoints();
  const ShardPicture at2 = ShardPicture::Of(*shard);
  round(2, 0);
  const ShardPicture at4 = ShardPicture::Of(*shard);
  CHECK(shard->Status().dc_compensated == 4);

  REQUIRE(shard->Rollback(2, 2).ok());
  CHECK(ShardPicture::Of(*shard) == at2);
  // Redone with the same pulls and pushes: exactly the same state.
  round(2, 2);
  CHECK(ShardPicture::Of(*shard) == at4);
  CHECK(shard->Status().dc_compensated == 6);

  // Without a pull after the rollback, a push is applied as it came.
  REQUIRE(shard->Rollback(2, 3).ok());
  const TwoVariables w2 = Weights(*shard);
  REQUIRE(shard->Push(0, 2, Gradient(0, 2).Bytes(), 3).ok());
  const TwoVariables got = Weights(*shard);
  const TwoVariables want = SgdStep(w2, Gradient(0, 2), 0.5f, nullptr);
  CHECK(got.w == want.w);
  CHECK(got.b == want.b);
  CHECK(shard->Status().dc_uncompensated == 1);
}

TEST_CASE("async_beta1: Adam's momentum with it, and a bit-exact restore") {
  ShardOptions o = Async(1);
  o.optimizer = OptimizerOptions{};  // Adam, beta1 0.9
  o.async_beta1 = 0.5;
  o.checkpoint.dir = FreshDir("async_beta1");
  o.checkpoint.every_steps = 2;
  auto shard = MakeShard(o);
  // m = 0.5 * 0 + 0.5 * g exactly (beta1 0.9 would give 0.1 * g, rounded).
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0)).ok());
  std::vector<float> m = shard->CopySlot("m", 0);
  for (int i = 0; i < 6; ++i) CHECK(m[i] == 0.5f * Gradient(0, 0).w[i]);
  REQUIRE(Push(*shard, 0, 1, Gradient(0, 1)).ok());  // step 2: saved
  m = shard->CopySlot("m", 0);
  for (int i = 0; i < 6; ++i) {
    CHECK(m[i] == 0.25f * Gradient(0, 0).w[i] + 0.5f * Gradient(0, 1).w[i]);
  }
  REQUIRE(Push(*shard, 0, 2, Gradient(0, 2)).ok());  // step 3: not saved
  shard->FlushCheckpoints();
  const ShardPicture at3 = ShardPicture::Of(*shard);
  // The first server "crashed" (it is never shut down before the restart).
  // A restarted server restores step 2 (m, v, t and the weights) and,
  // after the rollback, redoes step 3 to exactly the same state.
  auto restarted = ParameterShard::Create(o);
  REQUIRE(restarted.ok());
  CHECK((*restarted)->restore_report().label == 2);
  REQUIRE((*restarted)->Rollback(2, 2).ok());
  REQUIRE((*restarted)->Push(0, 2, Gradient(0, 2).Bytes(), 2).ok());
  CHECK(ShardPicture::Of(**restarted) == at3);
}

TEST_CASE(
    "DC-ASGD keeps one older weights version per worker, the very one its "
    "last pull got, until its next pull") {
  constexpr int kWorkers = 3;
  ShardOptions o = Async(kWorkers);
  o.dc_asgd_lambda = 0.5;
  auto shard = MakeShard(o);
  const int64_t version = 8 * sizeof(float);  // w (6) and b (2)
  // A pull whose caller lets the snapshot go at once: only the shard may
  // keep it alive.
  auto pull = [&](int w) {
    absl::StatusOr<ParameterShard::Snapshot> s = PullNow(*shard, w);
    REQUIRE(s.ok());
    return std::weak_ptr<const WeightsSnapshot>(*s);
  };
  auto check_memory = [&] {
    const ShardMemory m = shard->Status().memory;
    INFO("weight_versions " << m.weight_versions << ", compensation "
                            << m.compensation);
    CHECK(m.weights == version);
    // One version per worker's last pull, and two spares at most.
    CHECK(m.weight_versions <= (kWorkers + 2) * version);
    CHECK(m.compensation <= version);
  };
  // Worker w pulls step w, then pushes: each holds another older version.
  std::vector<std::weak_ptr<const WeightsSnapshot>> pulled(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    pulled[w] = pull(w);
    REQUIRE(Push(*shard, w, w, Gradient(w, w)).ok());
    check_memory();
  }
  for (int w = 0; w < kWorkers; ++w) {
    INFO("worker " << w);
    std::shared_ptr<const WeightsSnapshot> kept = pulled[w].lock();
    REQUIRE(kept != nullptr);  // the pull's own snapshot: no copy
    CHECK(kept->step == w);
  }
  // Worker 0's next pull lets its old version go; the others' stay.
  const std::weak_ptr<const WeightsSnapshot> newer = pull(0);
  CHECK(pulled[0].expired());
  CHECK_FALSE(newer.expired());
  CHECK_FALSE(pulled[1].expired());
  CHECK_FALSE(pulled[2].expired());
  // Many pulls and pushes later the versions alive are still bounded.
  for (int round = 0; round < 20; ++round) {
    for (int w = 0; w < kWorkers; ++w) {
      const int64_t step = shard->Status().step;
      pulled[w] = pull(w);
      if ((round + w) % 2 == 0) {
        REQUIRE(Push(*shard, w, step, Gradient(w, step)).ok());
      }
      check_memory();
    }
  }
  const ShardStatus s = shard->Status();
  CHECK(s.step > 30);
  CHECK(s.dc_compensated == s.counters.applied);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
