// ShardModel: what a shard learns and the updates that change it, with no
// shard around it. The expected weights are computed here by hand (plain
// SGD, values exact in float32), not read back from the model.
#include "ps/shard/shard_model.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "ps/shard/shard_checkpointing.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::InitialValues;
using testing::TwoVariables;

constexpr float kRate = 0.5f;

ShardOptions SgdOptions(Mode mode) {
  ShardOptions o;
  o.mode = mode;
  o.replicas_to_aggregate = 2;
  o.total_num_replicas = 3;
  o.optimizer.kind = OptimizerOptions::Kind::kSgd;
  o.optimizer.learning_rate = kRate;
  return o;
}

// A model of InitialValues(), initialized.
struct Fixture {
  explicit Fixture(const ShardOptions& o)
      : options(o), pool(1), model(options, 2, 3, &pool) {
    auto store = VariableStore::Create(InitialValues().Bytes());
    REQUIRE(store.ok());
    REQUIRE(model.Initialize(*std::move(store), "shard 0").ok());
  }
  ShardOptions options;
  ThreadPool pool;
  ShardModel model;
};

// The float pointers of a gradient, in layout order ("w", "b").
std::vector<const float*> Pointers(const TwoVariables& g) {
  return {g.w.data(), g.b.data()};
}

TwoVariables WeightsOf(const ShardModel& m) {
  TwoVariables t;
  const WeightsSnapshot& s = *m.current();
  const float* w = s.weights[0].data();
  const float* b = s.weights[1].data();
  t.w.assign(w, w + 6);
  t.b.assign(b, b + 2);
  return t;
}

// Gradients of multiples of 1/4: their means and SGD steps stay exact.
TwoVariables Grad(float base) {
  TwoVariables g;
  for (int i = 0; i < 6; ++i) g.w[i] = base + 0.25f * i;
  g.b = {base, -base};
  return g;
}

TwoVariables SgdStep(const TwoVariables& w, const TwoVariables& mean,
                     float scale) {
  TwoVariables out = w;
  for (int i = 0; i < 6; ++i) out.w[i] -= kRate * scale * mean.w[i];
  for (int i = 0; i < 2; ++i) out.b[i] -= kRate * scale * mean.b[i];
  return out;
}

void CheckWeights(const ShardModel& m, const TwoVariables& want) {
  const TwoVariables got = WeightsOf(m);
  CHECK(got.w == want.w);
  CHECK(got.b == want.b);
}

TEST_CASE("a sync step applies the mean of its pushes, summed or not") {
  const TwoVariables a = Grad(1.0f), b = Grad(-0.5f);
  TwoVariables mean;
  for (int i = 0; i < 6; ++i) mean.w[i] = (a.w[i] + b.w[i]) / 2;
  for (int i = 0; i < 2; ++i) mean.b[i] = (a.b[i] + b.b[i]) / 2;
  const TwoVariables want = SgdStep(InitialValues(), mean, 1.0f);

  SECTION("the pushes in hand") {
    Fixture f(SgdOptions(Mode::kSync));
    DecisionInputs in;
    in.pushes = {Pointers(a), Pointers(b)};
    f.model.ApplySyncStep(in, 1.0, /*replicas_next=*/0);
    CheckWeights(f.model, want);
  }
  SECTION("summed into the aggregate as they came") {
    Fixture f(SgdOptions(Mode::kSync));
    f.model.aggregator()->Add(Pointers(a));
    f.model.aggregator()->Add(Pointers(b));
    DecisionInputs in;
    in.summed = true;
    f.model.ApplySyncStep(in, 1.0, /*replicas_next=*/0);
    CheckWeights(f.model, want);
  }
}

TEST_CASE("a sync step advances the step, empties the aggregate, takes N") {
  Fixture f(SgdOptions(Mode::kSync));
  CHECK(f.model.step() == 0);
  CHECK(f.model.StepN(3) == 2);
  const TwoVariables a = Grad(0.25f);
  f.model.aggregator()->Add(Pointers(a));
  DecisionInputs in;
  in.summed = true;
  f.model.ApplySyncStep(in, 0.5, /*replicas_next=*/3);
  CHECK(f.model.step() == 1);
  CheckWeights(f.model, SgdStep(InitialValues(), a, 0.5f));
  ShardStatus s;
  f.model.AddStatus(&s);
  CHECK(s.step == 1);
  CHECK(s.pending_gradients == 0);
  CHECK(f.model.StepN(3) == 3);
  CHECK(f.model.current()->step == 1);
}

TEST_CASE("an async push is applied and its staleness recorded") {
  Fixture f(SgdOptions(Mode::kAsync));
  const TwoVariables a = Grad(1.0f);
  DecisionInputs in;
  in.pushes = {Pointers(a)};
  in.step = 0;
  f.model.ApplyAsyncPush(/*worker=*/1, in, 1.0, /*staleness=*/2);
  f.model.ApplyAsyncPush(/*worker=*/2, in, 1.0, /*staleness=*/2);
  TwoVariables want = SgdStep(InitialValues(), a, 1.0f);
  want = SgdStep(want, a, 1.0f);
  CheckWeights(f.model, want);
  CHECK(f.model.step() == 2);
  CHECK(f.model.async().histogram() == std::map<int64_t, int64_t>{{2, 2}});
}

TEST_CASE("a restore puts back what was saved, and refuses other variables") {
  Fixture f(SgdOptions(Mode::kSync));
  const TwoVariables a = Grad(1.0f);
  DecisionInputs in;
  in.pushes = {Pointers(a)};
  f.model.ApplySyncStep(in, 1.0, 0);
  ShardCheckpoint saved;
  f.model.Save(&saved);
  const uint32_t digest = f.model.Digest();
  const TwoVariables at_save = WeightsOf(f.model);

  f.model.ApplySyncStep(in, 1.0, 0);
  REQUIRE(f.model.step() == 2);
  const TwoVariables moved = WeightsOf(f.model);
  REQUIRE(moved.w != at_save.w);

  // Another set of variables: refused, nothing changes.
  ShardCheckpoint other = saved;
  {
    std::vector<TensorBytes> one = {TwoVariables().Bytes()[0]};
    auto store = VariableStore::Create(one);
    REQUIRE(store.ok());
    other.weights = (*store)->current();
  }
  const std::vector<TensorBytes> other_vars =
      ShardCheckpointing::Variables(*other.weights);
  CHECK_FALSE(f.model.Restore(other, other_vars, 1).ok());
  CHECK(f.model.step() == 2);
  CheckWeights(f.model, moved);

  const std::vector<TensorBytes> vars =
      ShardCheckpointing::Variables(*saved.weights);
  REQUIRE(f.model.Restore(saved, vars, /*generation=*/3).ok());
  CHECK(f.model.step() == 1);
  CHECK(f.model.current()->generation == 3);
  CheckWeights(f.model, at_save);
  CHECK(f.model.Digest() == digest);
}

TEST_CASE("variables too large for one message are refused, nothing kept") {
  ShardOptions o = SgdOptions(Mode::kSync);
  o.max_message_bytes = 1024;  // below the overhead a message keeps
  ThreadPool pool(1);
  ShardModel model(o, 2, 3, &pool);
  auto store = VariableStore::Create(InitialValues().Bytes());
  REQUIRE(store.ok());
  const absl::Status s = model.Initialize(*std::move(store), "shard 3");
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(
      std::string(s.message()),
      Catch::Contains("shard 3") && Catch::Contains("max_message_bytes"));
  CHECK_FALSE(model.initialized());
  CHECK(model.current() == nullptr);
  ShardMemory m;
  model.AddMemory(&m);
  CHECK(m.weights == 0);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
