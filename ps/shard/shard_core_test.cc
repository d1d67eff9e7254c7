// ShardCore as a plain state machine, with no ParameterShard around it: a
// call runs to its end and leaves the pull answers it made ready in `ready`
// without running them; a follower's core applies shard 0's decisions to
// the pushes it staged, bit for bit, and refuses one that names a push it
// never staged, with nothing applied.
#include "ps/shard/shard_core.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "ps/shard/push_checks.h"

namespace psgd {
namespace ps {
namespace {

const std::vector<int64_t> kShape = {4};

// Sync, one worker, N = 1, SGD with learning rate 0.5: one push is a step,
// w - 0.5 g, exact in float for the values below.
ShardOptions SyncOneWorker(int num_shards, int shard_index) {
  ShardOptions o;
  o.mode = Mode::kSync;
  o.total_num_replicas = 1;
  o.replicas_to_aggregate = 1;
  o.num_shards = num_shards;
  o.shard_index = shard_index;
  o.optimizer.kind = OptimizerOptions::Kind::kSgd;
  o.optimizer.learning_rate = 0.5;
  return o;
}

std::vector<TensorBytes> Tensor(const std::vector<float>& v) {
  std::vector<TensorBytes> out = {FloatTensorBytes("w", kShape, v.data())};
  out[0].kind = VariableKind::kParameter;
  return out;
}

// A core holding `initial`, worker 0 joined.
void Start(ShardCore* core, const std::vector<float>& initial) {
  ShardCore::Ready ready;
  REQUIRE(core->Initialize(Tensor(initial),
                           VariableStore::Create(Tensor(initial)), &ready)
              .ok());
  REQUIRE(core->Join(0, 0).ok());
}

std::vector<float> Weights(const ShardCore& core) {
  auto w = core.LatestWeights()->weights[0].span();
  return std::vector<float>(w.begin(), w.end());
}

TEST_CASE(
    "a held pull is answered only through ready, after the push that "
    "reaches its step") {
  const ShardOptions options = SyncOneWorker(1, 0);
  ThreadPool bulk(1);
  ShardCore core(options, "shard 0", &bulk, nullptr);
  const std::vector<float> initial = {1.0f, 2.0f, 3.0f, 4.0f};
  Start(&core, initial);

  bool called = false;
  int64_t answered_step = -1;
  ShardCore::PullDone done = [&](absl::StatusOr<ShardCore::Snapshot> s) {
    called = true;
    REQUIRE(s.ok());
    answered_step = (*s)->step;
  };
  absl::StatusOr<ShardCore::Snapshot> answer;
  const uint64_t ticket = core.Pull(1, 0, 0, &done, &answer);
  CHECK(ticket != 0);  // held: the shard is at step 0

  const std::vector<float> g = {0.5f, -1.0f, 0.25f, 2.0f};
  PushReply reply;
  ShardCore::Ready ready;
  REQUIRE(
      core.DecideWhole(0, 0, Tensor(g), 0, nullptr, 0, &reply, &ready).ok());
  CHECK(reply.step == 1);
  REQUIRE(ready.size() == 1);
  CHECK_FALSE(called);  // the core never runs an answer itself
  for (auto& [callback, value] : ready) callback(std::move(value));
  CHECK(called);
  CHECK(answered_step == 1);
  const std::vector<float> expected = {
      initial[0] - 0.5f * g[0], initial[1] - 0.5f * g[1],
      initial[2] - 0.5f * g[2], initial[3] - 0.5f * g[3]};
  CHECK(Weights(core) == expected);
}

TEST_CASE(
    "a follower's core applies shard 0's decision to the push it "
    "staged, and refuses one naming a push it never staged") {
  const ShardOptions options0 = SyncOneWorker(2, 0);
  const ShardOptions options1 = SyncOneWorker(2, 1);
  ThreadPool bulk(1);
  // Shard 0's decisions, as its relay hands them out.
  absl::Mutex mu;
  std::vector<Decision> sent;
  DecisionRelay relay(2, /*generation=*/1);
  relay.set_deliver(
      [&](int shard, int64_t generation,
          absl::Span<const Decision> decisions) -> absl::StatusOr<int64_t> {
        absl::MutexLock lock(&mu);
        for (const Decision& d : decisions) sent.push_back(d);
        return decisions.back().seq;
      });
  ShardCore shard0(options0, "shard 0", &bulk, &relay);
  ShardCore shard1(options1, "shard 1", &bulk, nullptr);
  const std::vector<float> initial = {1.0f, 2.0f, 3.0f, 4.0f};
  Start(&shard0, initial);
  Start(&shard1, initial);

  // The worker stages its push on shard 1 and has shard 0 decide its own
  // part of it (DecidePush), under one push id.
  const std::vector<float> g = {0.5f, -1.0f, 0.25f, 2.0f};
  const uint64_t push_id = 7;
  ShardCore::Ready ready;
  PushReply staged;
  // Staged as the front stages it: a copy of the values, made by the
  // check's pass there, here by hand.
  std::vector<float*> copy_to;
  std::vector<StagedGradient> floats = StagingFor(Tensor(g), nullptr, &copy_to);
  REQUIRE(copy_to.size() == 1);
  std::copy(g.begin(), g.end(), copy_to[0]);
  REQUIRE(shard1
              .Stage(0, 0, Tensor(g), &floats, 0, nullptr, push_id,
                     /*whole=*/true, &staged, &ready)
              .ok());
  CHECK(staged.staged);
  CHECK(shard1.step() == 0);
  PushReply decided;
  REQUIRE(
      shard0.DecideWhole(0, 0, Tensor(g), 0, nullptr, push_id, &decided, &ready)
          .ok());
  CHECK(decided.step == 1);
  REQUIRE(relay.AwaitDelivered(absl::Now() + absl::Seconds(10)));
  std::vector<Decision> decisions;
  {
    absl::MutexLock lock(&mu);
    decisions = sent;
  }
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0].kind == Decision::Kind::kSyncStep);

  int64_t applied = 0;
  REQUIRE(shard1.ApplyDecisions(1, decisions, &ready, &applied).ok());
  CHECK(applied == 1);
  CHECK(shard1.step() == 1);
  CHECK(Weights(shard1) == Weights(shard0));
  CHECK(Weights(shard1) != initial);

  // The next step's decision, naming a push shard 1 never staged.
  Decision forged = decisions[0];
  forged.seq = 2;
  forged.step = 1;
  forged.push_ids = {99};
  const absl::Status refused =
      shard1.ApplyDecisions(1, {forged}, &ready, &applied);
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.message()), Catch::Contains("shard 1") &&
                                                 Catch::Contains("step 1") &&
                                                 Catch::Contains("not staged"));
  CHECK(applied == 1);
  CHECK(shard1.step() == 1);
  CHECK(Weights(shard1) == Weights(shard0));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
