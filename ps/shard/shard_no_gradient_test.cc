// Parameters without a gradient (docs/PS.md, "Parameters without a
// gradient"): a push may mark a variable as having none in its step (a
// frozen parameter, or one the step did not use). In exact arithmetic:
//   - sync, no push of the step has it: the variable, its optimizer slots
//     and its weight decay are untouched;
//   - sync, some pushes have it: the mean over all the step's pushes, the
//     others counting as zeros;
//   - async: a marked variable is left alone by that push;
//   - pushes in parts: a marker is a part like any other;
//   - a marker with data, or of another shape, is refused by name.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ps/shard/shard.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::InitialValues;
using testing::MakeShard;
using testing::ShapeB;
using testing::ShapeW;
using testing::TwoVariables;
using testing::Weights;

// The gradient of "w" with "b" marked as without one.
std::vector<TensorBytes> WithoutB(const TwoVariables& g) {
  TensorBytes b{"b", ShapeB(), DType::kFloat32, {}, std::nullopt};
  b.no_gradient = true;
  return {FloatTensorBytes("w", ShapeW(), g.w.data()), b};
}

std::vector<TensorBytes> WithoutBoth() {
  TensorBytes w{"w", ShapeW(), DType::kFloat32, {}, std::nullopt};
  TensorBytes b{"b", ShapeB(), DType::kFloat32, {}, std::nullopt};
  w.no_gradient = b.no_gradient = true;
  return {w, b};
}

ShardOptions SyncOptions(OptimizerOptions::Kind kind, int n, int m) {
  ShardOptions o;
  o.replicas_to_aggregate = n;
  o.total_num_replicas = m;
  o.optimizer.kind = kind;
  o.optimizer.learning_rate = 0.5;
  if (kind == OptimizerOptions::Kind::kMomentum) o.optimizer.momentum = 0.5;
  if (kind != OptimizerOptions::Kind::kAdam) o.optimizer.weight_decay = 0.25;
  return o;
}

PushReply MustPush(ParameterShard& shard, int worker, int64_t step,
                   const std::vector<TensorBytes>& g) {
  auto r = shard.Push(worker, step, g);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE(
    "sync: a variable no push of the step has a gradient for is not "
    "updated: no decay, no slot change") {
  const auto kind =
      GENERATE(OptimizerOptions::Kind::kSgd, OptimizerOptions::Kind::kMomentum,
               OptimizerOptions::Kind::kAdam);
  INFO("optimizer " << static_cast<int>(kind));
  auto shard = MakeShard(SyncOptions(kind, 2, 2));
  const char* slot = kind == OptimizerOptions::Kind::kAdam ? "m" : "momentum";
  for (int64_t s = 0; s < 100; ++s) {
    MustPush(*shard, 0, s, WithoutB(testing::ExactGradient(0, s)));
    CHECK(MustPush(*shard, 1, s, WithoutB(testing::ExactGradient(1, s)))
              .outcome == PushOutcome::kApplied);
  }
  const TwoVariables after = Weights(*shard);
  CHECK(after.b == InitialValues().b);  // bit for bit
  CHECK(after.w != InitialValues().w);
  if (kind != OptimizerOptions::Kind::kSgd) {
    CHECK(shard->CopySlot(slot, 1) == std::vector<float>(2, 0.0f));
    CHECK(shard->CopySlot(slot, 0) != std::vector<float>(6, 0.0f));
  }
  // A push with no gradient at all still counts for the step.
  MustPush(*shard, 0, 100, WithoutBoth());
  MustPush(*shard, 1, 100, WithoutBoth());
  CHECK(shard->Status().step == 101);
  CHECK(Weights(*shard).w == after.w);
}

TEST_CASE(
    "sync: a variable only some pushes have is their sum over all the "
    "step's pushes") {
  // SGD, lr 0.5, no decay: b -= 0.5 * (g0.b + 0) / 2.
  ShardOptions o = SyncOptions(OptimizerOptions::Kind::kSgd, 2, 2);
  o.optimizer.weight_decay = 0.0;
  auto shard = MakeShard(o);
  const TwoVariables g0 = testing::ExactGradient(0, 0);
  const TwoVariables g1 = testing::ExactGradient(1, 0);
  MustPush(*shard, 0, 0, g0.Bytes());
  MustPush(*shard, 1, 0, WithoutB(g1));
  const TwoVariables after = Weights(*shard);
  const TwoVariables init = InitialValues();
  for (int i = 0; i < 2; ++i) {
    CHECK(after.b[i] == init.b[i] - 0.5f * (g0.b[i] / 2.0f));
  }
  for (int i = 0; i < 6; ++i) {
    CHECK(after.w[i] == init.w[i] - 0.5f * ((g0.w[i] + g1.w[i]) / 2.0f));
  }
}

TEST_CASE("async: a push leaves the variables it has no gradient for alone") {
  ShardOptions o = testing::AsyncSgdOptions(2);
  o.optimizer.kind = OptimizerOptions::Kind::kMomentum;
  o.optimizer.momentum = 0.5;
  o.optimizer.weight_decay = 0.25;
  auto shard = MakeShard(o);
  for (int64_t s = 0; s < 20; ++s) {
    MustPush(*shard, static_cast<int>(s % 2), s,
             WithoutB(testing::ExactGradient(0, s)));
  }
  CHECK(Weights(*shard).b == InitialValues().b);
  CHECK(shard->CopySlot("momentum", 1) == std::vector<float>(2, 0.0f));
  // Then a push that has it: b moves.
  MustPush(*shard, 0, 20, testing::ExactGradient(0, 20).Bytes());
  CHECK(Weights(*shard).b != InitialValues().b);
}

TEST_CASE("pushes in parts: a marker is a part like any other") {
  auto shard = MakeShard(SyncOptions(OptimizerOptions::Kind::kSgd, 1, 1));
  const TwoVariables g = testing::ExactGradient(0, 0);
  const std::vector<TensorBytes> whole = WithoutB(g);
  auto first = shard->PushPart(0, 0, {whole[1]});
  REQUIRE(first.ok());
  CHECK(first->staged);
  auto last = shard->PushPart(0, 0, {whole[0]});
  REQUIRE(last.ok());
  CHECK(last->outcome == PushOutcome::kApplied);
  CHECK(Weights(*shard).b == InitialValues().b);
  CHECK(Weights(*shard).w != InitialValues().w);
}

TEST_CASE(
    "a marker with data or of another shape is refused by name, and "
    "changes nothing") {
  auto shard = MakeShard(SyncOptions(OptimizerOptions::Kind::kSgd, 1, 1));
  const TwoVariables g = testing::ExactGradient(0, 0);
  std::vector<TensorBytes> with_data = g.Bytes();
  with_data[1].no_gradient = true;
  auto r = shard->Push(0, 0, with_data);
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("'b' is marked as without a gradient"));
  const std::vector<int64_t> wrong = {3};
  std::vector<TensorBytes> wrong_shape = WithoutB(g);
  wrong_shape[1].shape = wrong;
  r = shard->Push(0, 0, wrong_shape);
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("'b'"));
  CHECK(shard->Status().step == 0);
  CHECK(Weights(*shard).w == InitialValues().w);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
