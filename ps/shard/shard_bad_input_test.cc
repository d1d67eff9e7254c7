// Every bad input a shard can receive is refused with INVALID_ARGUMENT or
// FAILED_PRECONDITION and a message naming what is wrong, and leaves the
// weights, the optimizer slots, the step, the pending aggregate and the
// membership exactly as they were.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "ps/shard/shard.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::MakeShard;
using testing::ShapeB;
using testing::ShapeW;
using testing::ShardPicture;
using testing::TwoVariables;

// A sync shard (N=2 of M=3) at step 1 with one gradient pending for step 1
// and non-zero Adam slots, so that any change would show.
std::unique_ptr<ParameterShard> BusyShard() {
  ShardOptions o;
  o.replicas_to_aggregate = 2;
  o.total_num_replicas = 3;
  auto shard = MakeShard(o);
  const TwoVariables g = TwoVariables::Constant(0.5f, -0.25f);
  REQUIRE(testing::Push(*shard, 0, 0, g).ok());
  REQUIRE(testing::Push(*shard, 1, 0, g)->outcome == PushOutcome::kApplied);
  REQUIRE(testing::Push(*shard, 0, 1, g)->outcome == PushOutcome::kAggregated);
  return shard;
}

// Expects `push` to be refused with `code` and a message containing `text`,
// with the shard unchanged and the refusal counted.
void ExpectRefused(ParameterShard& shard, int worker, int64_t step,
                   const std::vector<TensorBytes>& gradients,
                   absl::StatusCode code, absl::string_view text) {
  const ShardPicture before = ShardPicture::Of(shard);
  const int64_t refused = shard.Status().counters.refused;
  absl::Status s = shard.Push(worker, step, gradients).status();
  INFO(s.ToString());
  CHECK(s.code() == code);
  CHECK(s.message().find(text) != absl::string_view::npos);
  CHECK(ShardPicture::Of(shard) == before);
  CHECK(shard.Status().counters.refused == refused + 1);
}

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kPrecondition = absl::StatusCode::kFailedPrecondition;

TEST_CASE("bad gradients are refused and change nothing") {
  auto shard = BusyShard();
  const TwoVariables g = TwoVariables::Constant(0.125f, 0.0f);

  SECTION("unknown variable") {
    std::vector<TensorBytes> t = g.Bytes();
    t[1].name = "bias";
    ExpectRefused(*shard, 1, 1, t, kInvalid,
                  "shard 0: push from worker 1 for step 1: gradient for "
                  "unknown variable 'bias'");
  }
  SECTION("missing variable") {
    ExpectRefused(*shard, 1, 1, {g.Bytes()[0]}, kInvalid,
                  "no gradient for variable 'b'");
  }
  SECTION("wrong shape") {
    const std::vector<int64_t> shape32 = {3, 2};
    std::vector<TensorBytes> t = g.Bytes();
    t[0].shape = shape32;
    ExpectRefused(*shard, 1, 1, t, kInvalid,
                  "gradient 'w' has shape [3, 2] but the variable has shape "
                  "[2, 3]");
  }
  SECTION("wrong byte count") {
    std::vector<TensorBytes> t = g.Bytes();
    t[0].data.remove_suffix(1);
    ExpectRefused(*shard, 1, 1, t, kInvalid,
                  "gradient 'w' of shape [2, 3] needs 24 bytes of float32 but "
                  "carries 23");
  }
  SECTION("dtype mismatch") {
    std::vector<TensorBytes> t = g.Bytes();
    t[1].dtype = DType::kBFloat16;
    t[1].data = t[1].data.substr(0, 4);
    ExpectRefused(*shard, 1, 1, t, kInvalid,
                  "gradient 'b' has dtype bfloat16; this shard stores float32");
  }
  SECTION("NaN") {
    TwoVariables bad = g;
    bad.w[3] = std::nanf("");
    ExpectRefused(*shard, 1, 1, bad.Bytes(), kInvalid,
                  "gradient 'w' has the non-finite value nan at element 3");
  }
  SECTION("Inf") {
    TwoVariables bad = g;
    bad.b[1] = std::numeric_limits<float>::infinity();
    ExpectRefused(*shard, 1, 1, bad.Bytes(), kInvalid,
                  "gradient 'b' has the non-finite value inf at element 1");
  }
  SECTION("finite, but too large for the optimizer") {
    // Found by the shard fuzzer: 2.9e32 squared overflowed Adam's v to Inf.
    TwoVariables bad = g;
    bad.b[1] = 2.9e32f;
    ExpectRefused(*shard, 1, 1, bad.Bytes(), kInvalid,
                  "gradient 'b' has the value 2.9e+32 at element 1, beyond "
                  "+-1e+18, the largest magnitude it may have");
    bad.b[1] = 0;
    bad.w[0] = -std::nextafter(kMaxGradientMagnitude, 1e30f);
    ExpectRefused(*shard, 1, 1, bad.Bytes(), kInvalid, "at element 0");
  }
}

TEST_CASE("pushes that do not fit the shard's state are refused") {
  auto shard = BusyShard();
  const TwoVariables g = TwoVariables::Constant(0.125f, 0.0f);

  SECTION("a step from the future") {
    ExpectRefused(*shard, 1, 2, g.Bytes(), kPrecondition,
                  "step 2 is from the future: the shard is at step 1");
    CHECK(PushRefusalOf(shard->Push(1, 2, g.Bytes()).status()) ==
          PushRefusal::kFromFuture);
  }
  SECTION("a second push from the same worker for the same step") {
    ExpectRefused(*shard, 0, 1, g.Bytes(), kPrecondition,
                  "worker 0 already pushed for step 1");
    CHECK(PushRefusalOf(shard->Push(0, 1, g.Bytes()).status()) ==
          PushRefusal::kAlreadyPushed);
  }
  SECTION("a second push for a step already completed") {
    ExpectRefused(*shard, 1, 0, g.Bytes(), kPrecondition,
                  "worker 1 already pushed for step 0");
  }
  SECTION("a worker that has not joined") {
    REQUIRE(shard->Leave(2).ok());
    ExpectRefused(*shard, 2, 1, g.Bytes(), kPrecondition,
                  "worker 2 is not a live member (join first)");
    CHECK(PushRefusalOf(shard->Push(2, 1, g.Bytes()).status()) ==
          PushRefusal::kNotLive);
  }
  SECTION("a worker id out of range") {
    ExpectRefused(*shard, 3, 1, g.Bytes(), kInvalid,
                  "worker_id 3 is not in [0, total_num_replicas=3)");
    CHECK(PushRefusalOf(shard->Push(3, 1, g.Bytes()).status()) ==
          PushRefusal::kNone);
  }
  SECTION("a negative step") {
    ExpectRefused(*shard, 1, -1, g.Bytes(), kInvalid, "step -1 must be >= 0");
  }
}

TEST_CASE("a push before Initialize is refused") {
  auto shard = ParameterShard::Create(ShardOptions{});
  REQUIRE(shard.ok());
  REQUIRE((*shard)->Join(0).ok());
  ExpectRefused(**shard, 0, 0, TwoVariables().Bytes(), kPrecondition,
                "the shard is not initialized");
}

TEST_CASE("an Initialize with another variable set is refused") {
  auto shard = BusyShard();
  const ShardPicture before = ShardPicture::Of(*shard);
  const TwoVariables v = testing::InitialValues();
  auto refused = [&](std::vector<TensorBytes> t, absl::string_view text) {
    absl::Status s = shard->Initialize(t).status();
    INFO(s.ToString());
    CHECK(s.code() == kPrecondition);
    CHECK(s.message().find(text) != absl::string_view::npos);
    CHECK(ShardPicture::Of(*shard) == before);
  };
  refused({v.Bytes()[0]}, "stored variable 'b' is missing");
  std::vector<TensorBytes> renamed = v.Bytes();
  renamed[0].name = "weights";
  refused(renamed, "variable 'weights' is not among the shard's stored");
  std::vector<TensorBytes> reshaped = v.Bytes();
  reshaped[1].shape = ShapeW();
  refused(reshaped,
          "variable 'b' has shape [2, 3] but the stored one has "
          "shape [2]");
  std::vector<TensorBytes> extra = v.Bytes();
  extra.push_back(ParameterBytes("c", ShapeB(), v.b.data()));
  refused(extra, "variable 'c' is not among");
}

TEST_CASE("bad initial values are refused and leave the shard empty") {
  auto shard = ParameterShard::Create(ShardOptions{});
  REQUIRE(shard.ok());
  TwoVariables v = testing::InitialValues();
  v.w[0] = std::nanf("");
  absl::Status s = (*shard)->Initialize(v.Bytes()).status();
  CHECK(s.code() == kInvalid);
  CHECK(s.message() ==
        "shard 0: initial value 'w' has the non-finite value nan at element 0");
  CHECK(!(*shard)->Status().initialized);
}

TEST_CASE("requests for another cluster are refused naming both names") {
  ShardOptions o;
  o.cluster_name = "alpha";
  auto shard = ParameterShard::Create(o);
  REQUIRE(shard.ok());
  CHECK((*shard)->CheckCluster("alpha").ok());
  absl::Status s = (*shard)->CheckCluster("beta");
  CHECK(s.code() == kPrecondition);
  CHECK(s.message() ==
        "request for cluster 'beta' reached shard 0 of cluster 'alpha'");
}

TEST_CASE("bad pulls and membership calls are refused") {
  auto shard = BusyShard();
  auto negative = shard->Pull(-1, 0, absl::Now() + absl::Seconds(5));
  CHECK(negative.status().code() == kInvalid);
  CHECK(negative.status().message().find("min_step -1") !=
        absl::string_view::npos);
  CHECK(shard->Pull(0, 7, absl::Now() + absl::Seconds(5)).status().code() ==
        kInvalid);
  CHECK(shard->Join(-2).status().code() == kInvalid);
  CHECK(shard->Leave(3).status().code() == kInvalid);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
