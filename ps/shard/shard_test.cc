// ParameterShard: sync (N of M, stale and surplus drops, pulls released by
// the update, membership), async (staleness histogram, max_push_staleness,
// lr scaling; the staleness bound and DC-ASGD are in shard_async_test.cc),
// pulls, Initialize and Shutdown. Bad input is in shard_bad_input_test.cc.
#include "ps/shard/shard.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <thread>

#include "ps/state/optimizer.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::InitialValues;
using testing::MakeShard;
using testing::Push;
using testing::TwoVariables;
using testing::Weights;

// Worker w's gradient for step s: distinct, exactly representable values.
TwoVariables Gradient(int w, int64_t s) {
  TwoVariables g;
  for (int i = 0; i < 6; ++i) g.w[i] = 0.125f * (w + 1) - 0.25f * i + s;
  g.b = {0.5f * w - 1.0f, 0.25f * s + 0.125f};
  return g;
}

// Adam on the mean of `grads`, as a replay next to the shard.
class Replay {
 public:
  explicit Replay(const OptimizerOptions& o) : w_(InitialValues()) {
    optimizer_ = *CreateOptimizer(o, {6, 2});
  }
  void StepOnMean(const std::vector<TwoVariables>& grads, double scale = 1.0) {
    TwoVariables mean = TwoVariables::Constant(0, 0);
    for (const TwoVariables& g : grads) {
      for (int i = 0; i < 6; ++i) mean.w[i] += g.w[i];
      for (int i = 0; i < 2; ++i) mean.b[i] += g.b[i];
    }
    const float n = static_cast<float>(grads.size());
    for (float& x : mean.w) x /= n;
    for (float& x : mean.b) x /= n;
    const float* in[] = {w_.w.data(), w_.b.data()};
    const float* g[] = {mean.w.data(), mean.b.data()};
    float* out[] = {w_.w.data(), w_.b.data()};
    optimizer_->Apply(in, g, out, scale);
  }
  void CheckEquals(const TwoVariables& got) const {
    for (int i = 0; i < 6; ++i) {
      CHECK(got.w[i] == Approx(w_.w[i]).epsilon(1e-6));
    }
    for (int i = 0; i < 2; ++i) {
      CHECK(got.b[i] == Approx(w_.b[i]).epsilon(1e-6));
    }
  }

 private:
  TwoVariables w_;
  std::unique_ptr<Optimizer> optimizer_;
};

ShardOptions SyncOptions(int n, int m) {
  ShardOptions o;
  o.replicas_to_aggregate = n;
  o.total_num_replicas = m;
  return o;
}

TEST_CASE("sync N=3 of M=4: one update, surplus, stale, pulls released") {
  auto shard = MakeShard(SyncOptions(3, 4));
  Replay replay(OptimizerOptions{});

  // Step 0 by workers 0, 1, 2; worker 3 is slow.
  for (int w = 0; w < 3; ++w) REQUIRE(Push(*shard, w, 0, Gradient(w, 0)).ok());
  replay.StepOnMean({Gradient(0, 0), Gradient(1, 0), Gradient(2, 0)});
  REQUIRE(shard->Status().step == 1);

  // Step s = 1. Pulls for s + 1 wait: two asynchronous, one blocking.
  std::atomic<int> released{0};
  std::atomic<int64_t> released_step{-1};
  for (int i = 0; i < 2; ++i) {
    CHECK(shard->PullAsync(2, 0, [&](auto snapshot) {
      REQUIRE(snapshot.ok());
      released_step = (*snapshot)->step;
      ++released;
    }) != 0);
  }
  absl::StatusOr<ParameterShard::Snapshot> blocking;
  std::thread puller(
      [&] { blocking = shard->Pull(2, 1, absl::Now() + absl::Seconds(30)); });

  auto r0 = Push(*shard, 0, 1, Gradient(0, 1));
  auto r1 = Push(*shard, 1, 1, Gradient(1, 1));
  REQUIRE(r0.ok());
  REQUIRE(r1.ok());
  CHECK(r0->outcome == PushOutcome::kAggregated);
  CHECK(r1->outcome == PushOutcome::kAggregated);
  CHECK(r1->step == 1);
  CHECK(r1->reason == "gradient 2 of 3 for step 1");
  CHECK(released == 0);
  CHECK(shard->Status().pending_gradients == 2);

  auto r2 = Push(*shard, 2, 1, Gradient(2, 1));
  REQUIRE(r2.ok());
  CHECK(r2->outcome == PushOutcome::kApplied);
  CHECK(r2->step == 2);
  CHECK(r2->reason == "completed step 1 with the average of 3 gradients");
  CHECK(released == 2);  // released by the pushing thread, before it returns
  CHECK(released_step == 2);
  puller.join();
  REQUIRE(blocking.ok());
  CHECK((*blocking)->step == 2);

  // Worker 3's gradients arrive late: one from s - 1, then one from s.
  auto stale = Push(*shard, 3, 0, Gradient(3, 0));
  REQUIRE(stale.ok());
  CHECK(stale->outcome == PushOutcome::kDroppedStale);
  CHECK(stale->reason == "stale: computed from step 0, the shard is at step 2");
  auto surplus = Push(*shard, 3, 1, Gradient(3, 1));
  REQUIRE(surplus.ok());
  CHECK(surplus->outcome == PushOutcome::kDroppedSurplus);
  CHECK(surplus->step == 2);

  // Exactly one update for step 1: Adam on the mean of the first three.
  replay.StepOnMean({Gradient(0, 1), Gradient(1, 1), Gradient(2, 1)});
  replay.CheckEquals(Weights(*shard));
  ShardStatus s = shard->Status();
  CHECK(s.step == 2);
  CHECK(s.counters.aggregated == 4);
  CHECK(s.counters.applied == 2);
  CHECK(s.counters.dropped_stale == 1);
  CHECK(s.counters.dropped_surplus == 1);
  CHECK(s.counters.refused == 0);
  CHECK(s.pending_gradients == 0);
  CHECK(s.mode == Mode::kSync);
}

TEST_CASE("adaptive backups: the shard chooses N from the arrivals") {
  // M = 3, N in [1, 3], a window of one step, no warm-up; the arrivals'
  // clock is the test's: whole seconds, so that the rule's arithmetic is
  // exact (ps/state/adaptive_backups_test.cc has the rule alone).
  ShardOptions o = SyncOptions(3, 3);
  o.adaptive_backups = true;
  o.adaptive = {1, 3, 1, 0};
  double now = 0;
  o.adaptive_clock = [&now] { return absl::UnixEpoch() + absl::Seconds(now); };
  auto shard = MakeShard(o);  // step 0 published at 0
  Replay replay(OptimizerOptions{});
  CHECK(shard->Status().replicas_to_aggregate == 3);

  // Step 0 needs all three: two come at 1 s, one at 3 s. Offsets {1, 1, 3}:
  // n / T(n) = 1, 2, 1: N = 2 for step 1.
  now = 1;
  auto a = Push(*shard, 0, 0, Gradient(0, 0));
  auto b = Push(*shard, 1, 0, Gradient(1, 0));
  REQUIRE((a.ok() && b.ok()));
  CHECK(a->replicas_to_aggregate == 3);
  CHECK(a->outcome == PushOutcome::kAggregated);
  now = 3;
  auto c = Push(*shard, 2, 0, Gradient(2, 0));
  REQUIRE(c.ok());
  CHECK(c->outcome == PushOutcome::kApplied);
  CHECK(c->replicas_to_aggregate == 3);
  replay.StepOnMean({Gradient(0, 0), Gradient(1, 0), Gradient(2, 0)});
  CHECK(shard->Status().replicas_to_aggregate == 2);

  // Step 1 (published at 3) completes with the first two, at 4 s; the
  // third is surplus.
  now = 4;
  auto d = Push(*shard, 1, 1, Gradient(1, 1));
  REQUIRE(d.ok());
  CHECK(d->outcome == PushOutcome::kAggregated);
  CHECK(d->replicas_to_aggregate == 2);
  auto e = Push(*shard, 0, 1, Gradient(0, 1));
  REQUIRE(e.ok());
  CHECK(e->outcome == PushOutcome::kApplied);
  CHECK(e->reason == "completed step 1 with the average of 2 gradients");
  replay.StepOnMean({Gradient(1, 1), Gradient(0, 1)});
  now = 6;
  auto f = Push(*shard, 2, 1, Gradient(2, 1));
  REQUIRE(f.ok());
  CHECK(f->outcome == PushOutcome::kDroppedSurplus);
  replay.CheckEquals(Weights(*shard));
  // Step 1's offsets were {1, 1} at its completion: T(3) counted its age,
  // 1 s: n / T(n) = 1, 2, 3: N = 3 again for step 2.
  CHECK(shard->Status().replicas_to_aggregate == 3);
  CHECK(shard->Status().counters.applied == 2);
}

TEST_CASE("sync: a step of one gradient applies it as the mean would") {
  // N = 1 (one worker, or N = 1 of M) applies the pushed gradient without
  // aggregating it first; N = 2 with two equal gradients averages them to
  // the same values: the weights must be the same bits.
  auto one = MakeShard(SyncOptions(1, 1));
  auto two = MakeShard(SyncOptions(2, 2));
  Replay replay(OptimizerOptions{});
  for (int64_t s = 0; s < 3; ++s) {
    REQUIRE(Push(*one, 0, s, Gradient(0, s)).ok());
    auto reply = Push(*two, 0, s, Gradient(0, s));
    REQUIRE(reply.ok());
    CHECK(reply->outcome == PushOutcome::kAggregated);
    reply = Push(*two, 1, s, Gradient(0, s));
    REQUIRE(reply.ok());
    CHECK(reply->outcome == PushOutcome::kApplied);
    replay.StepOnMean({Gradient(0, s)});
  }
  CHECK(one->Status().step == 3);
  CHECK(one->Status().counters.applied == 3);
  CHECK(one->Status().pending_gradients == 0);
  CHECK(Weights(*one).w == Weights(*two).w);
  CHECK(Weights(*one).b == Weights(*two).b);
  replay.CheckEquals(Weights(*one));
}

TEST_CASE("sync: a step never waits for a worker that left") {
  auto shard = MakeShard(SyncOptions(3, 4));
  Replay replay(OptimizerOptions{});
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0))->outcome ==
          PushOutcome::kAggregated);
  REQUIRE(Push(*shard, 1, 0, Gradient(1, 0))->outcome ==
          PushOutcome::kAggregated);
  // 3 live after the first leave: still min(3, 3) = 3 needed.
  REQUIRE(shard->Leave(3).ok());
  CHECK(shard->Status().step == 0);
  // 2 live: the two gradients gathered complete the step at once.
  auto left = shard->Leave(2);
  REQUIRE(left.ok());
  CHECK(left->step == 1);
  CHECK(left->live_workers == std::vector<int>{0, 1});
  replay.StepOnMean({Gradient(0, 0), Gradient(1, 0)});
  replay.CheckEquals(Weights(*shard));
  CHECK(shard->Status().counters.completed_by_leave == 1);

  // With 2 live, two gradients complete step 1.
  REQUIRE(Push(*shard, 0, 1, Gradient(0, 1))->outcome ==
          PushOutcome::kAggregated);
  REQUIRE(Push(*shard, 1, 1, Gradient(1, 1))->outcome == PushOutcome::kApplied);
  replay.StepOnMean({Gradient(0, 1), Gradient(1, 1)});

  // Policy: when the last workers leave, what was gathered completes.
  REQUIRE(Push(*shard, 0, 2, Gradient(0, 2))->outcome ==
          PushOutcome::kAggregated);
  REQUIRE(shard->Leave(0).ok());  // 1 live, 1 gathered: complete
  replay.StepOnMean({Gradient(0, 2)});
  REQUIRE(shard->Leave(1).ok());  // nothing gathered: nothing happens
  CHECK(shard->Status().step == 3);
  CHECK(shard->Status().live_workers.empty());
  replay.CheckEquals(Weights(*shard));

  // A worker that left may not push; it may join again.
  auto refused = Push(*shard, 0, 3, Gradient(0, 3));
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(PushRefusalOf(refused.status()) == PushRefusal::kNotLive);
  CHECK(refused.status().message().find("not a live member") !=
        absl::string_view::npos);
  REQUIRE(shard->Join(0).ok());
  CHECK(Push(*shard, 0, 3, Gradient(0, 3))->outcome == PushOutcome::kApplied);
}

TEST_CASE("sync: with N following the live workers the backups stay backups") {
  ShardOptions o = SyncOptions(2, 3);  // N = 2 of 3: one backup worker
  o.n_follows_live = true;
  auto shard = MakeShard(o);
  CHECK(shard->Status().replicas_to_aggregate == 2);
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0))->outcome ==
          PushOutcome::kAggregated);
  auto second = Push(*shard, 1, 0, Gradient(1, 0));
  CHECK(second->outcome == PushOutcome::kApplied);
  CHECK(second->replicas_to_aggregate == 2);
  CHECK(Push(*shard, 2, 0, Gradient(2, 0))->outcome ==
        PushOutcome::kDroppedSurplus);
  // Worker 2 leaves: N = 2 - 1 = 1, where a fixed N would stay 2.
  REQUIRE(shard->Leave(2).ok());
  CHECK(shard->Status().replicas_to_aggregate == 1);
  auto alone = Push(*shard, 0, 1, Gradient(0, 1));
  CHECK(alone->outcome == PushOutcome::kApplied);
  CHECK(alone->replicas_to_aggregate == 1);
  CHECK(Push(*shard, 1, 1, Gradient(1, 1))->outcome ==
        PushOutcome::kDroppedSurplus);
  // It comes back: N = 2 again.
  REQUIRE(shard->Join(2).ok());
  CHECK(shard->Status().replicas_to_aggregate == 2);
  CHECK(Push(*shard, 2, 2, Gradient(2, 2))->outcome ==
        PushOutcome::kAggregated);

  ShardOptions bad = SyncOptions(2, 3);
  bad.n_follows_live = true;
  bad.adaptive_backups = true;
  bad.adaptive = {1, 3, 20, 5};
  CHECK(absl::IsInvalidArgument(ParameterShard::Create(bad).status()));
  ShardOptions no_follow = SyncOptions(2, 3);
  no_follow.lr_scale_follows_n = true;
  CHECK(absl::IsInvalidArgument(ParameterShard::Create(no_follow).status()));
}

TEST_CASE("sync: the linear rule follows each step's N, and the rate is kept") {
  // SGD at 0.1 for N = 2 (the schedule's scale as the config computes it
  // for N = 2); no backups, up to 3 workers.
  ShardOptions o = SyncOptions(2, 2);
  o.max_workers = 3;
  o.n_follows_live = true;
  o.lr_scale_follows_n = true;
  o.optimizer.kind = OptimizerOptions::Kind::kSgd;
  o.optimizer.learning_rate = 0.1f;
  auto shard = MakeShard(o);
  CHECK(shard->LatestWeights()->learning_rate == 0.0);  // step 0: none
  // Each step's update: w[0] -= rate * mean of the gradients' w1.
  auto step = [&](std::vector<int> workers, double want_rate) {
    const int64_t s = shard->Status().step;
    const auto& latest = *shard->LatestWeights();
    const int iw = latest.layout->Find("w");
    const float before = latest.weights[iw].data()[0];
    float mean = 0;
    for (int w : workers) mean += Gradient(w, s).w[0] / workers.size();
    for (int w : workers) REQUIRE(Push(*shard, w, s, Gradient(w, s)).ok());
    REQUIRE(shard->Status().step == s + 1);
    const WeightsSnapshot& after = *shard->LatestWeights();
    CHECK(after.learning_rate == Approx(want_rate));
    CHECK(after.weights[iw].data()[0] ==
          Approx(before - static_cast<float>(want_rate) * mean));
  };
  step({0, 1}, 0.1);  // N = 2: the rate as configured
  REQUIRE(shard->Join(2).ok());
  step({0, 1, 2}, 0.15);  // N = 3: 3/2 of it
  REQUIRE(shard->Leave(1).ok());
  REQUIRE(shard->Leave(2).ok());
  step({0}, 0.05);  // N = 1, the one-gradient path: 1/2
}

TEST_CASE("sync: a silent worker's lease runs out; a waiting one's does not") {
  ShardOptions options = SyncOptions(3, 3);
  options.worker_lease = absl::Seconds(30);
  auto shard = MakeShard(options);
  Replay replay(OptimizerOptions{});
  // Worker 0 pushes and waits for step 1 in a pull; worker 1 pushes and
  // goes quiet; worker 2 (killed) never pushes.
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0))->outcome ==
          PushOutcome::kAggregated);
  REQUIRE(Push(*shard, 1, 0, Gradient(1, 0))->outcome ==
          PushOutcome::kAggregated);
  bool pulled = false;
  int64_t pulled_step = -1;
  shard->PullAsync(1, 0, [&](absl::StatusOr<ParameterShard::Snapshot> s) {
    pulled = true;
    if (s.ok()) pulled_step = (*s)->step;
  });
  CHECK(!pulled);

  // Before the lease runs out nobody leaves.
  CHECK(shard->ExpireWorkers(absl::Now()).empty());
  CHECK(shard->Status().step == 0);

  // After it, workers 1 and 2 leave; worker 0, waiting in its pull, stays.
  // With one live worker the gathered gradients complete the step, which
  // releases the pull.
  std::vector<int> expired =
      shard->ExpireWorkers(absl::Now() + absl::Seconds(31));
  CHECK(expired == std::vector<int>{1, 2});
  ShardStatus status = shard->Status();
  CHECK(status.live_workers == std::vector<int>{0});
  CHECK(status.workers_expired == 2);
  CHECK(status.step == 1);
  CHECK(status.counters.completed_by_leave == 1);
  CHECK(pulled);
  CHECK(pulled_step == 1);
  replay.StepOnMean({Gradient(0, 0), Gradient(1, 0)});
  replay.CheckEquals(Weights(*shard));

  // The returned pull renewed worker 0's lease.
  CHECK(shard->ExpireWorkers(absl::Now() + absl::Seconds(29)).empty());
  // An expired worker may join again.
  REQUIRE(shard->Join(1).ok());
  CHECK(shard->Status().live_workers == std::vector<int>{0, 1});
}

TEST_CASE("leases: a zero lease never expires anyone") {
  auto shard = MakeShard(SyncOptions(2, 2));
  CHECK(shard->ExpireWorkers(absl::Now() + absl::Hours(1000)).empty());
  CHECK(shard->Status().live_workers == std::vector<int>{0, 1});
}

TEST_CASE("sync: a joining worker raises the count a step needs") {
  ShardOptions o = SyncOptions(2, 3);
  auto shard = ParameterShard::Create(o);
  REQUIRE(shard.ok());
  REQUIRE((*shard)->Initialize(InitialValues().Bytes()).ok());
  REQUIRE((*shard)->Join(0).ok());
  // One live worker: min(2, 1) = 1 gradient completes a step.
  CHECK(Push(**shard, 0, 0, Gradient(0, 0))->outcome == PushOutcome::kApplied);
  REQUIRE((*shard)->Join(1).ok());
  CHECK(Push(**shard, 0, 1, Gradient(0, 1))->outcome ==
        PushOutcome::kAggregated);
  CHECK(Push(**shard, 1, 1, Gradient(1, 1))->outcome == PushOutcome::kApplied);
}

ShardOptions AsyncOptions(int m) { return testing::AsyncSgdOptions(m); }

TEST_CASE("async: every push applies; the histogram follows the interleaving") {
  auto shard = MakeShard(AsyncOptions(3));
  Replay replay(AsyncOptions(3).optimizer);
  // (worker, step it computed from, expected staleness)
  const struct {
    int worker;
    int64_t from;
    int64_t staleness;
  } pushes[] = {
      {0, 0, 0},                        // all three pulled step 0
      {1, 0, 1}, {2, 0, 2}, {0, 1, 2},  // worker 0 pulled after its own push
      {1, 4, 0},                        // worker 1 pulled the newest
      {2, 3, 2},
  };
  int64_t step = 0;
  for (const auto& p : pushes) {
    auto r = Push(*shard, p.worker, p.from, Gradient(p.worker, p.from));
    REQUIRE(r.ok());
    CHECK(r->outcome == PushOutcome::kApplied);
    CHECK(r->staleness == p.staleness);
    CHECK(r->step == ++step);
    replay.StepOnMean({Gradient(p.worker, p.from)});
  }
  replay.CheckEquals(Weights(*shard));
  ShardStatus s = shard->Status();
  CHECK(s.staleness_histogram ==
        std::map<int64_t, int64_t>{{0, 2}, {1, 1}, {2, 3}});
  CHECK(s.counters.applied == 6);
  CHECK(s.step == 6);
  CHECK(s.mode == Mode::kAsync);
}

TEST_CASE("async: max_push_staleness refuses what exceeds it, and only that") {
  ShardOptions o = AsyncOptions(3);
  o.max_push_staleness = 1;
  auto shard = MakeShard(o);
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0)).ok());
  REQUIRE(Push(*shard, 1, 0, Gradient(1, 0)).ok());  // staleness 1
  auto before = testing::ShardPicture::Of(*shard);
  auto refused = Push(*shard, 2, 0, Gradient(2, 0));  // staleness 2
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(PushRefusalOf(refused.status()) == PushRefusal::kTooStale);
  CHECK(refused.status().message().find("staleness 2") !=
        absl::string_view::npos);
  CHECK(testing::ShardPicture::Of(*shard) == before);
  CHECK(shard->Status().counters.refused_too_stale == 1);
  CHECK(shard->Status().counters.refused == 1);
  // Not counted as its push for step 0: after a fresh pull it may push.
  CHECK(Push(*shard, 2, 2, Gradient(2, 2))->staleness == 0);
}

TEST_CASE("async: learning rate scaled by 1/staleness") {
  ShardOptions o = AsyncOptions(2);
  o.scale_lr_by_staleness = true;
  auto shard = MakeShard(o);
  Replay replay(o.optimizer);
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0))->staleness == 0);
  replay.StepOnMean({Gradient(0, 0)}, 1.0);
  REQUIRE(Push(*shard, 1, 0, Gradient(1, 0))->staleness == 1);
  replay.StepOnMean({Gradient(1, 0)}, 1.0);
  REQUIRE(Push(*shard, 0, 1, Gradient(0, 1))->staleness == 1);
  replay.StepOnMean({Gradient(0, 1)}, 1.0);
  REQUIRE(Push(*shard, 1, 1, Gradient(1, 1))->staleness == 2);
  replay.StepOnMean({Gradient(1, 1)}, 0.5);
  replay.CheckEquals(Weights(*shard));
}

TEST_CASE("pulls wait for Initialize, time out, and end at shutdown") {
  auto shard = ParameterShard::Create(SyncOptions(1, 1));
  REQUIRE(shard.ok());
  // Before Initialize even step 0 is not there yet.
  auto early = (*shard)->Pull(0, -1, absl::Now() + absl::Milliseconds(20));
  CHECK(early.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(early.status().message().find("not initialized") !=
        absl::string_view::npos);
  std::atomic<int64_t> got{-1};
  (*shard)->PullAsync(0, -1, [&](auto s) { got = (*s)->step; });
  REQUIRE((*shard)->Initialize(InitialValues().Bytes()).ok());
  CHECK(got == 0);

  // A withdrawn pull is never answered.
  bool called = false;
  uint64_t ticket = (*shard)->PullAsync(5, -1, [&](auto) { called = true; });
  CHECK((*shard)->CancelPull(ticket));
  CHECK(!(*shard)->CancelPull(ticket));

  absl::Status at_shutdown;
  (*shard)->PullAsync(7, -1, [&](auto s) { at_shutdown = s.status(); });
  CHECK(!(*shard)->AwaitShutdown(absl::Now()));
  (*shard)->Shutdown("training is over");
  CHECK((*shard)->AwaitShutdown(absl::Now()));
  CHECK(at_shutdown.code() == absl::StatusCode::kCancelled);
  CHECK(at_shutdown.message() == "shard 0 is shut down: training is over");
  CHECK(!called);
  // Everything but Status is refused afterwards.
  CHECK((*shard)->Join(0).status().code() == absl::StatusCode::kCancelled);
  CHECK(Push(**shard, 0, 0, Gradient(0, 0)).status().code() ==
        absl::StatusCode::kCancelled);
  CHECK((*shard)->Pull(0, -1, absl::Now()).status().code() ==
        absl::StatusCode::kCancelled);
  CHECK((*shard)->Status().shutting_down);
}

TEST_CASE("a second Initialize with the same variables changes nothing") {
  auto shard = MakeShard(SyncOptions(1, 1));
  REQUIRE(Push(*shard, 0, 0, Gradient(0, 0)).ok());
  const TwoVariables before = Weights(*shard);
  auto again = shard->Initialize(TwoVariables::Constant(9, 9).Bytes());
  REQUIRE(again.ok());
  CHECK(again->already_initialized);
  CHECK(again->step == 1);
  CHECK(Weights(*shard).w == before.w);
}

TEST_CASE("variables that do not fit in one message are refused") {
  ShardOptions o;
  o.max_message_bytes = 4 << 20;
  auto shard = ParameterShard::Create(o);
  REQUIRE(shard.ok());
  const std::vector<int64_t> shape = {1 << 20};
  std::vector<float> big(1 << 20, 0.0f);
  absl::Status s =
      (*shard)->Initialize({ParameterBytes("big", shape, big.data())}).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find("max_message_bytes=4194304") !=
        absl::string_view::npos);
  CHECK(!(*shard)->Status().initialized);
}

TEST_CASE("the largest gradients a shard takes keep everything finite") {
  // Sync sums of +-kMaxGradientMagnitude, squared by Adam, or times a large
  // SGD learning rate, from weights near the float range.
  for (auto kind :
       {OptimizerOptions::Kind::kAdam, OptimizerOptions::Kind::kSgd}) {
    ShardOptions o;
    o.replicas_to_aggregate = 2;
    o.total_num_replicas = 2;
    o.optimizer.kind = kind;
    o.optimizer.learning_rate = 1000;
    auto shard = ParameterShard::Create(o);
    REQUIRE(shard.ok());
    REQUIRE((*shard)
                ->Initialize(TwoVariables::Constant(3e38f, -3e38f).Bytes())
                .ok());
    REQUIRE((*shard)->Join(0).ok());
    REQUIRE((*shard)->Join(1).ok());
    for (int step = 0; step < 4; ++step) {
      const float big =
          step % 2 == 0 ? kMaxGradientMagnitude : -kMaxGradientMagnitude;
      const TwoVariables g = TwoVariables::Constant(-big, big);
      REQUIRE(Push(**shard, 0, step, g).ok());
      REQUIRE(Push(**shard, 1, step, g)->outcome == PushOutcome::kApplied);
    }
    const TwoVariables w = Weights(**shard);
    for (float x : w.w) CHECK(std::isfinite(x));
    for (float x : w.b) CHECK(std::isfinite(x));
    for (const char* slot : {"m", "v"}) {
      for (int i = 0; i < 2; ++i) {
        for (float x : (*shard)->CopySlot(slot, i)) CHECK(std::isfinite(x));
      }
    }
  }
}

}  // namespace
}  // namespace ps
}  // namespace psgd

namespace psgd {
namespace ps {
namespace {

TEST_CASE("memory: the shard's items, each against its share of the model") {
  // Two variables of 6 and 2 floats: 32 bytes a version.
  constexpr int64_t kVersion = 8 * sizeof(float);
  auto shard = testing::MakeShard(SyncOptions(2, 2));
  ShardMemory m = shard->Status().memory;
  CHECK(m.weights == kVersion);
  CHECK(m.optimizer_slots == 2 * kVersion);  // Adam's m and v
  CHECK(m.aggregate == kVersion);            // sync: one sum
  CHECK(m.staged_parts == 0);
  CHECK(m.compensation == 0);
  CHECK(m.pushes_in_flight == 0);  // the serving layer's, not the shard's

  // A pull holds its step's version while the next is published.
  ParameterShard::Snapshot held =
      *shard->Pull(0, 0, absl::Now() + absl::Seconds(5));
  for (int w = 0; w < 2; ++w) {
    REQUIRE(testing::Push(*shard, w, 0, Gradient(w, 0)).ok());
  }
  m = shard->Status().memory;
  CHECK(m.weight_versions == kVersion);
  held.reset();
  // Released versions are kept as spares (at most two) for the next
  // updates: memory does not grow with the steps.
  for (int64_t s = 1; s < 20; ++s) {
    for (int w = 0; w < 2; ++w) {
      REQUIRE(testing::Push(*shard, w, s, Gradient(w, s)).ok());
    }
  }
  m = shard->Status().memory;
  CHECK(m.weight_versions <= 2 * kVersion);
  CHECK(m.aggregate == kVersion);

  // A push in parts is staged until its last part.
  const TwoVariables g = Gradient(0, 20);
  const std::vector<TensorBytes> bytes = g.Bytes();
  REQUIRE(shard->PushPart(0, 20, absl::MakeConstSpan(&bytes[0], 1)).ok());
  CHECK(shard->Status().memory.staged_parts >= 6 * int64_t{sizeof(float)});
  CHECK(shard->Status().memory.Total() > shard->Status().memory.weights);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
