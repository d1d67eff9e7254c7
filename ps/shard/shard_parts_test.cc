// Pushes in parts (ParameterShard::PushPart): the same pushes sent whole to
// one shard and in parts to another (parts of several workers interleaved,
// in either order of the variables) give bit-identical weights, optimizer
// slots, replies, counters and staleness histograms: in sync N of M with
// backup workers (aggregated, applied, surplus, stale, refusals, a step
// completed by a Leave), in async (staleness, its bound, lr scaling) and
// across a rollback. Staged parts count for nothing until the last part, and
// a Leave, a rollback or a Join of another process under the worker's id
// drops them; malformed parts are refused naming the
// tensor with the shard unchanged.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "ps/shard/shard.h"
#include "ps/testing/checkpoint_test_util.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::MakeShard;
using testing::ShardPicture;
using testing::TwoVariables;

// Sync, N of M.
ShardOptions Options(int n, int m) {
  ShardOptions o;
  o.replicas_to_aggregate = n;
  o.total_num_replicas = m;
  return o;
}

TwoVariables Gradient(int w, int64_t s) {
  TwoVariables g;
  for (int i = 0; i < 6; ++i) g.w[i] = 0.3f * (w + 1) - 0.07f * i + 0.11f * s;
  g.b = {0.5f * w - 0.9f, 0.13f * s - 0.4f};
  return g;
}

// What became of one push, as comparable values.
struct Result {
  absl::StatusCode code = absl::StatusCode::kOk;
  PushRefusal refusal = PushRefusal::kNone;
  PushOutcome outcome = PushOutcome::kAggregated;
  int64_t step = 0;
  int64_t staleness = 0;
  std::string reason;
  bool operator==(const Result& o) const {
    return code == o.code && refusal == o.refusal && outcome == o.outcome &&
           step == o.step && staleness == o.staleness && reason == o.reason;
  }
};

Result ResultOf(const absl::StatusOr<PushReply>& r) {
  Result out;
  if (!r.ok()) {
    out.code = r.status().code();
    out.refusal = PushRefusalOf(r.status());
    return out;
  }
  out.outcome = r->outcome;
  out.step = r->step;
  out.staleness = r->staleness;
  out.reason = r->reason;
  return out;
}

struct Op {
  enum Kind { kPush, kLeave, kJoin } kind = kPush;
  int worker = 0;
  int64_t step = 0;
};

// `rounds` of ops; the pushes of a round are sent in parts, every first
// part (in reverse order) before any last part (in order), so that the
// decisions come in the round's order.
using Rounds = std::vector<std::vector<Op>>;

// Runs the rounds: a push's last (or only) part through `push`, a Leave
// or Join as it is; `before_round` first (the parts that stage).
std::vector<Result> Run(
    ParameterShard& shard, const Rounds& rounds,
    const std::function<absl::StatusOr<PushReply>(const Op&)>& push,
    const std::function<void(const std::vector<Op>&)>& before_round) {
  std::vector<Result> results;
  for (const auto& round : rounds) {
    before_round(round);
    for (const Op& op : round) {
      if (op.kind == Op::kLeave) {
        REQUIRE(shard.Leave(op.worker).ok());
      } else if (op.kind == Op::kJoin) {
        REQUIRE(shard.Join(op.worker).ok());
      } else {
        results.push_back(ResultOf(push(op)));
      }
    }
  }
  return results;
}

std::vector<Result> RunWhole(ParameterShard& shard, const Rounds& rounds) {
  return Run(
      shard, rounds,
      [&](const Op& op) {
        return shard.Push(op.worker, op.step,
                          Gradient(op.worker, op.step).Bytes());
      },
      [](const std::vector<Op>&) {});
}

std::vector<Result> RunParts(ParameterShard& shard, const Rounds& rounds,
                             int first) {
  return Run(
      shard, rounds,
      [&](const Op& op) {
        const TwoVariables g = Gradient(op.worker, op.step);
        auto r = shard.PushPart(op.worker, op.step, {g.Bytes()[1 - first]});
        if (r.ok()) CHECK_FALSE(r->staged);
        return r;
      },
      [&](const std::vector<Op>& round) {
        for (auto it = round.rbegin(); it != round.rend(); ++it) {
          if (it->kind != Op::kPush) continue;
          const TwoVariables g = Gradient(it->worker, it->step);
          auto r = shard.PushPart(it->worker, it->step, {g.Bytes()[first]});
          INFO(r.status().ToString());
          REQUIRE(r.ok());
          CHECK(r->staged);
        }
      });
}

void CheckSame(const ShardOptions& options, const Rounds& rounds) {
  for (int first : {0, 1}) {
    INFO("first part: variable " << first);
    auto whole = MakeShard(options);
    auto parts = MakeShard(options);
    const std::vector<Result> a = RunWhole(*whole, rounds);
    const std::vector<Result> b = RunParts(*parts, rounds, first);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("push " << i << ": " << a[i].reason << " / " << b[i].reason);
      CHECK(a[i] == b[i]);
    }
    CHECK(ShardPicture::Of(*whole) == ShardPicture::Of(*parts));
    const ShardStatus sa = whole->Status();
    const ShardStatus sb = parts->Status();
    CHECK(sa.counters.refused == sb.counters.refused);
    CHECK(sa.counters.refused_too_stale == sb.counters.refused_too_stale);
    CHECK(sa.counters.completed_by_leave == sb.counters.completed_by_leave);
  }
}

TEST_CASE("sync N of M in parts decides as whole pushes", "[shard][parts]") {
  ShardOptions o = Options(2, 4);
  const Rounds rounds = {
      {{Op::kPush, 0, 0}, {Op::kPush, 1, 0}, {Op::kPush, 2, 0}},  // surplus
      {{Op::kPush, 2, 1}, {Op::kPush, 0, 1}},
      {{Op::kPush, 0, 2}, {Op::kPush, 1, 1}},  // 1: surplus
      {{Op::kPush, 2, 2}, {Op::kPush, 3, 0}},  // 3: stale
      {{Op::kPush, 0, 9}},                     // from the future
      {{Op::kPush, 0, 2}},                     // already pushed
      {{Op::kPush, 1, 3}, {Op::kLeave, 3, 0}, {Op::kPush, 2, 3}},
  };
  CheckSame(o, rounds);
}

TEST_CASE("a Leave completes a step in parts as with whole pushes",
          "[shard][parts]") {
  ShardOptions o = Options(3, 3);
  const Rounds rounds = {
      {{Op::kPush, 0, 0}, {Op::kPush, 1, 0}},
      {{Op::kLeave, 2, 0}},
      {{Op::kJoin, 2, 0},
       {Op::kPush, 2, 1},
       {Op::kPush, 0, 1},
       {Op::kPush, 1, 1}},
  };
  CheckSame(o, rounds);
}

TEST_CASE("async in parts decides as whole pushes", "[shard][parts]") {
  ShardOptions o = Options(1, 3);
  o.mode = Mode::kAsync;
  o.staleness_bound = 2;
  o.scale_lr_by_staleness = true;
  const Rounds rounds = {
      {{Op::kPush, 0, 0}, {Op::kPush, 1, 0}, {Op::kPush, 2, 0}},
      {{Op::kPush, 0, 1}, {Op::kPush, 1, 1}},  // 1: beyond the bound
      {{Op::kPush, 2, 3}, {Op::kPush, 1, 4}},
  };
  CheckSame(o, rounds);
}

TEST_CASE("staged parts count for nothing until the last", "[shard][parts]") {
  ShardOptions o = Options(2, 2);
  auto shard = MakeShard(o);
  const ShardPicture before = ShardPicture::Of(*shard);
  const TwoVariables g = Gradient(0, 0);
  auto r = shard->PushPart(0, 0, {g.Bytes()[0]});
  REQUIRE(r.ok());
  CHECK(r->staged);
  CHECK(ShardPicture::Of(*shard) == before);
  CHECK(shard->Status().pending_gradients == 0);

  SECTION("a Leave drops them") {
    REQUIRE(shard->Leave(0).ok());
    REQUIRE(shard->Join(0).ok());
    auto last = shard->PushPart(0, 0, {g.Bytes()[1]});
    REQUIRE(last.ok());
    CHECK(last->staged);  // the first part is gone
  }
  SECTION("a Join of another process under the worker's id drops them") {
    // The process that staged the first part was killed; the one started
    // in its place joins and pushes the same step in parts.
    REQUIRE(shard->Join(0, /*incarnation=*/2).ok());
    auto first = shard->PushPart(0, 0, {g.Bytes()[0]});
    REQUIRE(first.ok());
    CHECK(first->staged);
    auto last = shard->PushPart(0, 0, {g.Bytes()[1]});
    REQUIRE(last.ok());
    CHECK_FALSE(last->staged);
    CHECK(last->outcome == PushOutcome::kAggregated);
  }
  SECTION("a Join of the same process (a lease's renewal) keeps them") {
    REQUIRE(shard->Join(0, /*incarnation=*/7).ok());
    REQUIRE(shard->PushPart(0, 0, {g.Bytes()[0]})->staged);
    REQUIRE(shard->Join(0, /*incarnation=*/7).ok());
    auto last = shard->PushPart(0, 0, {g.Bytes()[1]});
    REQUIRE(last.ok());
    CHECK_FALSE(last->staged);
    CHECK(last->outcome == PushOutcome::kAggregated);
  }
  SECTION("a part of a newer step replaces them") {
    REQUIRE(shard->Push(1, 0, Gradient(1, 0).Bytes()).ok());
    REQUIRE(shard->Push(0, 0, Gradient(0, 0).Bytes()).ok());  // step 1
    REQUIRE(shard->PushPart(0, 1, {g.Bytes()[1]})->staged);
    auto older = shard->PushPart(0, 0, {g.Bytes()[0]});
    CHECK(absl::IsFailedPrecondition(older.status()));
  }
  SECTION("a variable twice is refused, the stage unchanged") {
    auto twice = shard->PushPart(0, 0, {g.Bytes()[0]});
    CHECK(absl::IsInvalidArgument(twice.status()));
    CHECK_THAT(std::string(twice.status().message()), Catch::Contains("'w'"));
    auto last = shard->PushPart(0, 0, {g.Bytes()[1]});
    REQUIRE(last.ok());
    CHECK_FALSE(last->staged);
    CHECK(last->outcome == PushOutcome::kAggregated);
  }
}

TEST_CASE("malformed parts are refused naming the tensor", "[shard][parts]") {
  ShardOptions o = Options(2, 2);
  auto shard = MakeShard(o);
  const TwoVariables g = Gradient(0, 0);
  REQUIRE(shard->PushPart(0, 0, {g.Bytes()[0]})->staged);
  const ShardPicture before = ShardPicture::Of(*shard);
  std::vector<float> bad(2, 1.0f);
  const std::vector<int64_t> shape3 = {3};
  const std::vector<float> nan = {0.0f, std::nanf("")};
  struct Case {
    const char* what;
    TensorBytes t;
    const char* names;
  };
  const std::vector<Case> cases = {
      {"unknown", FloatTensorBytes("x", testing::ShapeB(), bad.data()), "'x'"},
      {"shape", FloatTensorBytes("b", shape3, bad.data()), "'b'"},
      {"nan", FloatTensorBytes("b", testing::ShapeB(), nan.data()), "'b'"},
      {"twice", g.Bytes()[0], "'w'"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    TensorBytes t = c.t;
    if (std::string(c.what) == "shape") t.data = t.data.substr(0, 8);
    auto r = shard->PushPart(0, 0, {t});
    CHECK(absl::IsInvalidArgument(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains(c.names));
    CHECK(ShardPicture::Of(*shard) == before);
  }
  CHECK(absl::IsInvalidArgument(shard->PushPart(0, 0, {}).status()));
  // The stage is as it was: the last part completes the push.
  auto last = shard->PushPart(0, 0, {g.Bytes()[1]});
  REQUIRE(last.ok());
  CHECK_FALSE(last->staged);
}

TEST_CASE("a rollback drops staged parts; parts after it decide as whole",
          "[shard][parts]") {
  auto make = [](const std::string& name) {
    ShardOptions o = Options(2, 2);
    o.checkpoint.dir = testing::FreshDir(name);
    o.checkpoint.every_steps = 1;
    return MakeShard(o);
  };
  auto whole = make("whole");
  auto parts = make("parts");
  auto both = [&](int w, int64_t s, int64_t generation) {
    const TwoVariables g = Gradient(w, s);
    Result a = ResultOf(whole->Push(w, s, g.Bytes(), generation));
    auto first = parts->PushPart(w, s, {g.Bytes()[1]}, generation);
    REQUIRE(first.ok());
    REQUIRE(first->staged);
    Result b = ResultOf(parts->PushPart(w, s, {g.Bytes()[0]}, generation));
    CHECK(a == b);
  };
  both(0, 0, 1);
  both(1, 0, 1);  // step 1
  both(0, 1, 1);  // aggregated, pending
  // Worker 1 has staged a part of step 1 when the cluster rolls back.
  REQUIRE(parts->PushPart(1, 1, {Gradient(1, 1).Bytes()[0]}, 1)->staged);
  whole->FlushCheckpoints();
  parts->FlushCheckpoints();
  REQUIRE(whole->Rollback(1, 2).ok());
  REQUIRE(parts->Rollback(1, 2).ok());
  // The part staged before the rollback is gone: the next part of worker
  // 1's push does not complete it.
  auto after = parts->PushPart(1, 1, {Gradient(1, 1).Bytes()[1]}, 2);
  REQUIRE(after.ok());
  CHECK(after->staged);
  auto old_generation = parts->PushPart(1, 1, {Gradient(1, 1).Bytes()[0]}, 1);
  CHECK(absl::IsAborted(old_generation.status()));
  REQUIRE(parts->PushPart(1, 1, {Gradient(1, 1).Bytes()[0]}, 2).ok());
  REQUIRE(whole->Push(1, 1, Gradient(1, 1).Bytes(), 2).ok());
  both(0, 1, 2);  // completes step 2 in the new generation
  CHECK(ShardPicture::Of(*whole) == ShardPicture::Of(*parts));
  CHECK(whole->Status().generation == parts->Status().generation);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
