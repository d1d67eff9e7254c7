// Batch norm's running statistics on a shard (docs/CLUSTER.md, "Batch
// norm"), in exact arithmetic: a sync step folds in the mean of the batch
// statistics of the pushes it aggregated (surplus, stale and refused pushes
// bring none), async folds each push on arrival (delay compensation leaves
// them alone), pushes in parts, checkpoints and rollbacks carry them, no
// optimizer touches them; and what is refused: statistics of the wrong
// channel count, NaN or Inf, and statistics at all in LOCAL mode.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "ps/shard/shard.h"
#include "ps/testing/checkpoint_test_util.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

constexpr char kMean[] = "bn.running_mean";
constexpr char kVar[] = "bn.running_var";
// TensorBytes borrow their shapes.
const std::vector<int64_t> kShapeW = {2, 3};
const std::vector<int64_t> kShapeC = {2};
const std::vector<int64_t> kShape3 = {3};

// A weight "w" (2, 3) and one batch norm layer's statistics over 2
// channels.
struct BnTensors {
  std::vector<float> w = std::vector<float>(6);
  std::vector<float> mean = std::vector<float>(2);
  std::vector<float> var = std::vector<float>(2);

  // With their kinds, as an Initialize carries them (a push's kinds are
  // not read: the shard knows its own).
  std::vector<TensorBytes> Bytes() const {
    std::vector<TensorBytes> out = {
        FloatTensorBytes("w", kShapeW, w.data()),
        FloatTensorBytes(kMean, kShapeC, mean.data()),
        FloatTensorBytes(kVar, kShapeC, var.data())};
    out[0].kind = VariableKind::kParameter;
    out[1].kind = out[2].kind = VariableKind::kRunningStatistic;
    return out;
  }
  bool operator==(const BnTensors& o) const {
    return w == o.w && mean == o.mean && var == o.var;
  }
};

// Initial values: w = 1 + i/10, running mean 0, running variance 1.
BnTensors Initial() {
  BnTensors t;
  for (int i = 0; i < 6; ++i) t.w[i] = 1.0f + 0.1f * i;
  t.var = {1.0f, 1.0f};
  return t;
}

// Worker k's push for step s: a gradient and batch statistics, multiples of
// 1/8 (their sums and halves are exact in float32).
BnTensors PushOf(int k, int64_t s) {
  BnTensors p;
  for (int i = 0; i < 6; ++i) p.w[i] = 0.25f * (k + 1) - 0.125f * i + 0.5f * s;
  p.mean = {0.5f * k + 0.25f * s, -0.125f * k};
  p.var = {1.0f + 0.5f * k, 2.0f + 0.25f * s};
  return p;
}

BnTensors Pulled(ParameterShard& shard) {
  auto snapshot = shard.Pull(0, -1, absl::Now() + absl::Seconds(10));
  REQUIRE(snapshot.ok());
  const WeightsSnapshot& s = **snapshot;
  auto get = [&](const std::string& name) {
    const int i = s.layout->Find(name);
    REQUIRE(i >= 0);
    auto v = s.weights[i].span();
    return std::vector<float>(v.begin(), v.end());
  };
  BnTensors t;
  t.w = get("w");
  t.mean = get(kMean);
  t.var = get(kVar);
  return t;
}

// What the shard must hold after one optimizer step of SGD (learning rate
// 0.5) on the mean of `pushes`' gradients and one fold of the mean of their
// statistics, computed as the shard computes: the sum in arrival order, /
// count, then r = (1 - 0.1) * r + 0.1 * b in float32.
BnTensors Expected(const BnTensors& before,
                   const std::vector<BnTensors>& pushes) {
  BnTensors sum;
  for (const BnTensors& p : pushes) {
    for (int i = 0; i < 6; ++i) sum.w[i] += p.w[i];
    for (int c = 0; c < 2; ++c) {
      sum.mean[c] += p.mean[c];
      sum.var[c] += p.var[c];
    }
  }
  const float n = static_cast<float>(pushes.size());
  BnTensors after;
  for (int i = 0; i < 6; ++i) after.w[i] = before.w[i] - 0.5f * (sum.w[i] / n);
  for (int c = 0; c < 2; ++c) {
    after.mean[c] = (1.0f - 0.1f) * before.mean[c] + 0.1f * (sum.mean[c] / n);
    after.var[c] = (1.0f - 0.1f) * before.var[c] + 0.1f * (sum.var[c] / n);
  }
  return after;
}

ShardOptions SgdOptions(Mode mode, int n, int m) {
  ShardOptions o;
  o.mode = mode;
  o.replicas_to_aggregate = n;
  o.total_num_replicas = m;
  o.optimizer.kind = OptimizerOptions::Kind::kSgd;
  o.optimizer.learning_rate = 0.5;
  return o;
}

std::unique_ptr<ParameterShard> MakeBnShard(const ShardOptions& o) {
  auto shard = ParameterShard::Create(o);
  INFO(shard.status().ToString());
  REQUIRE(shard.ok());
  auto init = (*shard)->Initialize(Initial().Bytes());
  INFO(init.status().ToString());
  REQUIRE(init.ok());
  for (int k = 0; k < o.total_num_replicas; ++k)
    REQUIRE((*shard)->Join(k).ok());
  return *std::move(shard);
}

PushOutcome MustPush(ParameterShard& shard, int k, int64_t step,
                     const BnTensors& p) {
  auto r = shard.Push(k, step, p.Bytes());
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return r->outcome;
}

TEST_CASE(
    "sync N=2 of M=4: a step folds the mean of its pushes' statistics; "
    "surplus, stale and refused pushes bring none") {
  auto shard = MakeBnShard(SgdOptions(Mode::kSync, 2, 4));
  BnTensors expected = Initial();

  CHECK(MustPush(*shard, 0, 0, PushOf(0, 0)) == PushOutcome::kAggregated);
  CHECK(Pulled(*shard) == Initial());  // an aggregated push changes nothing
  CHECK(MustPush(*shard, 1, 0, PushOf(1, 0)) == PushOutcome::kApplied);
  expected = Expected(expected, {PushOf(0, 0), PushOf(1, 0)});
  CHECK(Pulled(*shard) == expected);
  CHECK(expected.mean[0] != 0.0f);  // the fold is not vacuous

  // Surplus: step 0 was completed without worker 2.
  CHECK(MustPush(*shard, 2, 0, PushOf(2, 0)) == PushOutcome::kDroppedSurplus);
  CHECK(Pulled(*shard) == expected);
  // Refused: NaN in worker 0's statistics, then a push from the future.
  BnTensors nan = PushOf(0, 1);
  nan.var[1] = std::nanf("");
  auto refused = shard->Push(0, 1, nan.Bytes());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("batch statistic 'bn.running_var'"));
  CHECK(shard->Push(1, 5, PushOf(1, 5).Bytes()).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(shard->Status().pending_gradients == 0);
  CHECK(Pulled(*shard) == expected);

  // Step 1 by workers 3 and 0 (0's refused push did not count as one).
  CHECK(MustPush(*shard, 3, 1, PushOf(3, 1)) == PushOutcome::kAggregated);
  CHECK(MustPush(*shard, 0, 1, PushOf(0, 1)) == PushOutcome::kApplied);
  expected = Expected(expected, {PushOf(3, 1), PushOf(0, 1)});
  CHECK(Pulled(*shard) == expected);
  // Step 2 by workers 1 and 0; then worker 2's push from step 1 is stale.
  CHECK(MustPush(*shard, 1, 2, PushOf(1, 2)) == PushOutcome::kAggregated);
  CHECK(MustPush(*shard, 0, 2, PushOf(0, 2)) == PushOutcome::kApplied);
  expected = Expected(expected, {PushOf(1, 2), PushOf(0, 2)});
  CHECK(MustPush(*shard, 2, 1, PushOf(2, 1)) == PushOutcome::kDroppedStale);
  CHECK(Pulled(*shard) == expected);
  CHECK(shard->Status().step == 3);
}

TEST_CASE("sync: a step of one push folds its statistics as they came") {
  auto shard = MakeBnShard(SgdOptions(Mode::kSync, 1, 2));
  CHECK(MustPush(*shard, 1, 0, PushOf(1, 0)) == PushOutcome::kApplied);
  CHECK(Pulled(*shard) == Expected(Initial(), {PushOf(1, 0)}));
}

TEST_CASE(
    "async: each push folds on arrival; delay compensation leaves "
    "statistics alone") {
  ShardOptions o = SgdOptions(Mode::kAsync, 1, 2);
  const bool dc = GENERATE(false, true);
  if (dc) o.dc_asgd_lambda = 0.5;
  auto shard = MakeBnShard(o);
  // Both workers pull step 0 (delay compensation records it).
  REQUIRE(shard->Pull(0, 0, absl::Now() + absl::Seconds(5)).ok());
  REQUIRE(shard->Pull(0, 1, absl::Now() + absl::Seconds(5)).ok());
  CHECK(MustPush(*shard, 0, 0, PushOf(0, 0)) == PushOutcome::kApplied);
  const BnTensors after1 = Pulled(*shard);
  CHECK(after1 == Expected(Initial(), {PushOf(0, 0)}));
  // Worker 1's push is one step stale: its gradient may be compensated,
  // its statistics are folded as they came.
  CHECK(MustPush(*shard, 1, 0, PushOf(1, 0)) == PushOutcome::kApplied);
  const BnTensors after2 = Pulled(*shard);
  const BnTensors plain = Expected(after1, {PushOf(1, 0)});
  CHECK(after2.mean == plain.mean);
  CHECK(after2.var == plain.var);
  if (dc) {
    CHECK(after2.w != plain.w);  // compensated: w moved between the steps
  } else {
    CHECK(after2.w == plain.w);
  }
}

TEST_CASE(
    "pushes in parts: statistics in a part of their own count when the "
    "push completes") {
  auto shard = MakeBnShard(SgdOptions(Mode::kSync, 2, 2));
  const BnTensors p0 = PushOf(0, 0), p1 = PushOf(1, 0);
  const std::vector<TensorBytes> b0 = p0.Bytes(), b1 = p1.Bytes();
  // Worker 0: statistics first, the gradient later; worker 1 whole.
  auto part = shard->PushPart(0, 0, {b0[1], b0[2]});
  REQUIRE(part.ok());
  CHECK(part->staged);
  CHECK(Pulled(*shard) == Initial());
  CHECK(MustPush(*shard, 1, 0, p1) == PushOutcome::kAggregated);
  CHECK(Pulled(*shard) == Initial());
  auto last = shard->PushPart(0, 0, {b0[0]});
  REQUIRE(last.ok());
  CHECK(last->outcome == PushOutcome::kApplied);
  // The sum in arrival order: worker 1's push completed first.
  CHECK(Pulled(*shard) == Expected(Initial(), {p1, p0}));
}

TEST_CASE("no optimizer touches the statistics: no slots, no weight decay") {
  ShardOptions o = SgdOptions(Mode::kSync, 1, 1);
  o.optimizer.kind = OptimizerOptions::Kind::kMomentum;
  o.optimizer.momentum = 0.5;
  o.optimizer.weight_decay = 0.25;
  auto shard = MakeBnShard(o);
  CHECK(MustPush(*shard, 0, 0, PushOf(0, 0)) == PushOutcome::kApplied);
  CHECK(shard->CopySlot("momentum", 0).size() == 6);
  CHECK(shard->CopySlot("momentum", 1).empty());
  CHECK(shard->CopySlot("momentum", 2).empty());
  const BnTensors after = Pulled(*shard);
  const BnTensors folded = Expected(Initial(), {PushOf(0, 0)});
  CHECK(after.mean == folded.mean);
  CHECK(after.var == folded.var);
}

TEST_CASE("checkpoints keep the statistics; a rollback returns them") {
  // Every optimizer: one with slots keeps none for a statistic, and the
  // checkpoint must still decode (with momentum or Adam no MANIFEST was ever
  // written, and a restart started empty).
  const auto kind =
      GENERATE(OptimizerOptions::Kind::kSgd, OptimizerOptions::Kind::kMomentum,
               OptimizerOptions::Kind::kAdam);
  const std::string dir =
      testing::FreshDir(absl::StrCat("bn_checkpoint_", static_cast<int>(kind)));
  ShardOptions o = SgdOptions(Mode::kSync, 2, 2);
  o.optimizer.kind = kind;
  if (kind == OptimizerOptions::Kind::kMomentum) o.optimizer.momentum = 0.9;
  o.checkpoint.dir = dir;
  o.checkpoint.every_steps = 1;
  auto shard = MakeBnShard(o);
  MustPush(*shard, 0, 0, PushOf(0, 0));
  MustPush(*shard, 1, 0, PushOf(1, 0));
  const BnTensors at1 = Pulled(*shard);
  const char* slot = kind == OptimizerOptions::Kind::kAdam ? "m" : "momentum";
  const std::vector<float> slot_at1 = shard->CopySlot(slot, 0);
  CHECK(slot_at1.empty() == (kind == OptimizerOptions::Kind::kSgd));
  MustPush(*shard, 0, 1, PushOf(0, 1));
  MustPush(*shard, 1, 1, PushOf(1, 1));
  shard->FlushCheckpoints();
  const BnTensors at2 = Pulled(*shard);
  REQUIRE(at2.mean != at1.mean);
  const ShardStatus written = shard->Status();
  INFO(written.last_checkpoint_error);
  CHECK(written.checkpoint_failures == 0);
  CHECK(written.last_complete_checkpoint_label == 2);
  CHECK(std::filesystem::exists(dir + "/step-2/MANIFEST"));

  auto rolled = shard->Rollback(1, 2);
  REQUIRE(rolled.ok());
  CHECK(Pulled(*shard) == at1);
  shard->Shutdown("restart");
  shard.reset();

  // A restarted shard restores the newest checkpoint (step 1 again, after
  // the rollback deleted step 2's).
  auto restored = ParameterShard::Create(o);
  REQUIRE(restored.ok());
  CHECK((*restored)->restore_report().label == 1);
  REQUIRE((*restored)->Rollback(1, 3).ok());
  CHECK(Pulled(**restored) == at1);
  CHECK((*restored)->CopySlot(slot, 0) == slot_at1);
  (*restored)->Shutdown("done");

  // A checkpoint with statistics does not fit a LOCAL cluster.
  ShardOptions local = o;
  local.batch_norm_statistics = BatchNormStatistics::kLocal;
  auto refused = ParameterShard::Create(local);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("'bn.running_mean'") && Catch::Contains("LOCAL"));
}

TEST_CASE(
    "statistics of the wrong channel count, NaN or Inf are refused "
    "naming the variable, and change nothing") {
  auto shard = MakeBnShard(SgdOptions(Mode::kSync, 1, 1));
  const BnTensors p = PushOf(0, 0);
  const std::vector<float> three = {0.5f, 0.5f, 0.5f};
  std::vector<TensorBytes> wrong = p.Bytes();
  wrong[1] = FloatTensorBytes(kMean, kShape3, three.data());
  auto r = shard->Push(0, 0, wrong);
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("bn.running_mean"));
  BnTensors inf = p;
  inf.mean[0] = std::numeric_limits<float>::infinity();
  r = shard->Push(0, 0, inf.Bytes());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("batch statistic 'bn.running_mean'"));
  // A push without its statistics is incomplete.
  r = shard->Push(0, 0, {p.Bytes()[0]});
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("bn."));
  CHECK(Pulled(*shard) == Initial());
  CHECK(shard->Status().step == 0);
  CHECK(shard->Status().counters.refused == 3);
  // The worker may still push for step 0.
  CHECK(MustPush(*shard, 0, 0, p) == PushOutcome::kApplied);
}

TEST_CASE("a variable's kind is what its Initialize says, not its name") {
  // The same three tensors, all declared parameters: "bn.running_mean" is
  // then trained by SGD like any other, and nothing is folded.
  auto created = ParameterShard::Create(SgdOptions(Mode::kSync, 1, 1));
  REQUIRE(created.ok());
  ParameterShard& shard = **created;
  const BnTensors init = Initial();
  std::vector<TensorBytes> parameters = init.Bytes();
  for (TensorBytes& t : parameters) t.kind = VariableKind::kParameter;
  REQUIRE(shard.Initialize(parameters).ok());
  REQUIRE(shard.Join(0).ok());
  const BnTensors p = PushOf(0, 0);
  REQUIRE(MustPush(shard, 0, 0, p) == PushOutcome::kApplied);
  const BnTensors after = Pulled(shard);
  for (int c = 0; c < 2; ++c) {
    CHECK(after.mean[c] == init.mean[c] - 0.5f * p.mean[c]);
    CHECK(after.var[c] == init.var[c] - 0.5f * p.var[c]);
  }
  CHECK(shard.Variables()[1].kind == VariableKind::kParameter);
  // A second Initialize that calls them statistics does not fit.
  auto again = shard.Initialize(init.Bytes());
  CHECK(again.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(again.status().message()),
             Catch::Contains("'bn.running_mean' is a running statistic") &&
                 Catch::Contains("stored one is a parameter"));
  // An Initialize that does not say a kind is refused, naming the tensor.
  auto fresh = ParameterShard::Create(SgdOptions(Mode::kSync, 1, 1));
  REQUIRE(fresh.ok());
  std::vector<TensorBytes> unsaid = init.Bytes();
  unsaid[2].kind = std::nullopt;
  auto refused = (*fresh)->Initialize(unsaid);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("'bn.running_var' does not say its kind"));
}

TEST_CASE("LOCAL: the shard refuses statistics at Initialize and in pushes") {
  ShardOptions o = SgdOptions(Mode::kSync, 1, 1);
  o.batch_norm_statistics = BatchNormStatistics::kLocal;
  auto created = ParameterShard::Create(o);
  REQUIRE(created.ok());
  ParameterShard& shard = **created;
  const BnTensors init = Initial();
  auto refused = shard.Initialize(init.Bytes());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("'bn.running_mean'") &&
                 Catch::Contains("model.batch_norm_statistics: LOCAL"));
  CHECK_FALSE(shard.Status().initialized);

  REQUIRE(shard.Initialize({init.Bytes()[0]}).ok());
  REQUIRE(shard.Join(0).ok());
  const BnTensors p = PushOf(0, 0);
  for (bool parts : {false, true}) {
    auto r =
        parts ? shard.PushPart(0, 0, p.Bytes()) : shard.Push(0, 0, p.Bytes());
    // The shard holds no statistics: a push of one names a variable it
    // does not have.
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("unknown variable 'bn.running_mean'"));
  }
  CHECK(shard.Status().step == 0);
  CHECK(shard.Status().counters.refused == 2);
  CHECK(shard.Push(0, 0, {p.Bytes()[0]}).ok());
  CHECK(shard.Status().step == 1);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
