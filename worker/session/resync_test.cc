// The re-sync decision after a failure, case by case, and the cost of the
// rollbacks of a run.
#include "worker/session/resync.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

using Kind = ResyncDecision::Kind;

ps::ShardStatus Shard(int index, int64_t step, int64_t generation) {
  ps::ShardStatus s;
  s.shard_index = index;
  s.num_shards = 2;
  s.initialized = true;
  s.step = step;
  s.generation = generation;
  return s;
}

TEST_CASE("shards in one generation are in step") {
  ResyncDecision d = DecideResync({Shard(0, 7, 3), Shard(1, 8, 3)});
  CHECK(d.kind == Kind::kInSync);
  CHECK(d.generation == 3);
  ps::ShardStatus fresh0 = Shard(0, 0, 1), fresh1 = Shard(1, 0, 1);
  fresh0.initialized = fresh1.initialized = false;
  d = DecideResync({fresh0, fresh1});
  CHECK(d.kind == Kind::kInSync);
  CHECK(d.generation == 0);  // not initialised yet: any
}

TEST_CASE("a restored shard makes the cluster roll back to its checkpoint") {
  ps::ShardStatus restored = Shard(1, 40, 2);
  restored.awaiting_rollback = true;
  restored.restored_label = 40;
  ResyncDecision d = DecideResync({Shard(0, 47, 3), restored});
  CHECK(d.kind == Kind::kRollback);
  CHECK(d.label == 40);
  CHECK(d.generation == 4);  // above every shard's
  CHECK(d.why == "a shard restored checkpoint step-40");

  // Both restarted (a whole job resumed): the older checkpoint of the two.
  ps::ShardStatus other = restored;
  other.shard_index = 0;
  other.restored_label = 30;
  d = DecideResync({other, restored});
  CHECK(d.kind == Kind::kRollback);
  CHECK(d.label == 30);
  CHECK(d.generation == 3);
}

TEST_CASE(
    "a rollback to a restored shard's checkpoint under way is joined, not "
    "started again") {
  // Worker A rolled shard 0 back to step-40 in generation 4; shard 1, which
  // restored step-40, has not taken it yet. Worker B, reading this, repeats
  // generation 4 instead of starting generation 5 (a second rollback).
  ps::ShardStatus restored = Shard(1, 40, 3);
  restored.awaiting_rollback = true;
  restored.restored_label = 40;
  ps::ShardStatus moved = Shard(0, 40, 4);
  moved.rollbacks = {{4, 40, 47, 40}};
  ResyncDecision d = DecideResync({moved, restored});
  CHECK(d.kind == Kind::kRollback);
  CHECK(d.label == 40);
  CHECK(d.generation == 4);
  // Once the other shard has stepped on in that generation (the restored
  // shard crashed again later, restoring the same checkpoint), it is a new
  // rollback.
  moved.step = 43;
  d = DecideResync({moved, restored});
  CHECK(d.generation == 5);
  // Likewise when the newest generation went back to another checkpoint.
  moved.step = 40;
  moved.rollbacks = {{4, 30, 47, 30}};
  moved.step = 30;
  d = DecideResync({moved, restored});
  CHECK(d.generation == 5);
}

TEST_CASE("a rollback half taken is repeated; shutdown ends; waits") {
  ps::ShardStatus ahead = Shard(0, 40, 4);
  ahead.rollbacks = {{3, 20, 25, 20}, {4, 40, 44, 40}};
  ResyncDecision d = DecideResync({ahead, Shard(1, 46, 3)});
  CHECK(d.kind == Kind::kRollback);
  CHECK(d.label == 40);
  CHECK(d.generation == 4);

  ps::ShardStatus down = Shard(1, 9, 1);
  down.shutting_down = true;
  CHECK(DecideResync({Shard(0, 9, 1), down}).kind == Kind::kShutDown);

  ps::ShardStatus empty = Shard(1, 0, 1);
  empty.initialized = false;
  d = DecideResync({Shard(0, 30, 1), empty});
  CHECK(d.kind == Kind::kWait);
  CHECK(d.why.find("shard 1 holds no variables") != std::string::npos);
}

TEST_CASE("steps redone: the furthest shard, per rollback") {
  ps::ShardStatus a = Shard(0, 0, 3), b = Shard(1, 0, 3);
  a.rollbacks = {{2, 20, 27, 20}, {3, 40, 41, 40}};
  b.rollbacks = {{2, 20, 20, 20}, {3, 40, 46, 40}};
  RollbackSummary s = SummarizeRollbacks({a, b});
  CHECK(s.rollbacks == 2);
  CHECK(s.steps_redone == 7 + 6);
  CHECK(s.max_steps_redone == 7);
  CHECK(SummarizeRollbacks({Shard(0, 5, 1)}).rollbacks == 0);
}

}  // namespace
}  // namespace psgd
