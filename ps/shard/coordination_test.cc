// One decision per push across every shard (docs/PS.md, "One decision per
// push"): three shards and four workers, with the order in which every
// shard stages the pushes and the order of the commits chosen by the test,
// must hold the same weights, bit for bit, as one shard holding the whole
// model that saw the pushes in the commit order; async the same, with the
// same pushes applied and refused. Also: refused decisions, and a
// non-coordinating shard and the coordinator killed between the staging and
// the decision.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/shard/shard.h"
#include "ps/testing/in_process_client.h"

namespace psgd {
namespace ps {
namespace {

constexpr int kShards = 3;
constexpr int kWorkers = 4;

// Shard k holds "a<k>" (4) and "b<k>" (3); the one-shard cluster all six.
std::vector<std::string> Names(int shard) {
  return {absl::StrCat("a", shard), absl::StrCat("b", shard)};
}
std::vector<int64_t> ShapeOf(const std::string& name) {
  return name[0] == 'a' ? std::vector<int64_t>{4} : std::vector<int64_t>{3};
}

// Values whose float sums depend on their order.
std::vector<float> Values(const std::string& name, int worker, int64_t step) {
  std::vector<float> v(static_cast<size_t>(ShapeOf(name)[0]));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(std::sin(1.3 * worker + 0.7 * step + 0.37 * i +
                                       name[1] * 0.11 +
                                       (name[0] == 'a' ? 0.0 : 2.0)) *
                              (1.0 + 0.3 * worker));
  }
  return v;
}

// The tensors of `shards` (-1: every shard's), with values from `make`.
struct Tensors {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<TensorBytes> Bytes(VariableKind kind) const {
    std::vector<TensorBytes> out;
    for (size_t i = 0; i < names.size(); ++i) {
      out.push_back(FloatTensorBytes(names[i], shapes[i], values[i].data()));
      out.back().kind = kind;
    }
    return out;
  }
};
Tensors Make(int shard, int worker, int64_t step) {
  Tensors t;
  for (int k = 0; k < kShards; ++k) {
    if (shard >= 0 && k != shard) continue;
    for (const std::string& n : Names(k)) {
      t.names.push_back(n);
      t.shapes.push_back(ShapeOf(n));
      t.values.push_back(Values(n, worker, step));
    }
  }
  return t;
}

uint64_t PushId(int worker, int64_t step) {
  return static_cast<uint64_t>(step) * 16 + static_cast<uint64_t>(worker) + 1;
}

ServerOptions Options(Mode mode, int shard, int num_shards,
                      const std::string& checkpoints = "") {
  ServerOptions o;
  o.mode = mode;
  o.shard_index = shard;
  o.num_shards = num_shards;
  o.total_num_replicas = kWorkers;
  o.replicas_to_aggregate = mode == Mode::kSync ? 3 : 1;
  o.optimizer.learning_rate = 0.01;
  if (mode == Mode::kAsync) {
    o.max_push_staleness = 2;
    o.scale_lr_by_staleness = true;
  }
  if (!checkpoints.empty()) {
    o.checkpoint.dir = checkpoints;
    o.checkpoint.every_steps = 2;
  }
  return o;
}

std::unique_ptr<ParameterShard> MakeShard(const ServerOptions& o, int holds) {
  auto shard = ParameterShard::Create(o);
  REQUIRE(shard.ok());
  // A restarted shard holds its checkpoint's state and live set.
  if ((*shard)->restore_report().label >= 0) return *std::move(shard);
  REQUIRE((*shard)
              ->Initialize(Make(holds, 0, -1).Bytes(VariableKind::kParameter))
              .ok());
  for (int w = 0; w < kWorkers; ++w) REQUIRE((*shard)->Join(w).ok());
  return *std::move(shard);
}

struct Cluster {
  std::vector<std::unique_ptr<ParameterShard>> shards;
  std::unique_ptr<ParameterShard> one;  // the one-shard reference

  void Link() {
    std::vector<ParameterShard*> raw;
    for (auto& s : shards) raw.push_back(s.get());
    LinkShardsInProcess(raw);
  }
};

Cluster MakeCluster(Mode mode, const std::string& checkpoints = "") {
  Cluster c;
  for (int k = 0; k < kShards; ++k) {
    c.shards.push_back(MakeShard(Options(mode, k, kShards, checkpoints), k));
  }
  c.Link();
  c.one = MakeShard(Options(mode, 0, 1), -1);
  return c;
}

// Every shard's variables equal the one shard's, bit for bit.
void CheckSameBits(Cluster& c) {
  REQUIRE(
      c.shards[0]->AwaitDecisionsDelivered(absl::Now() + absl::Seconds(30)));
  auto one = c.one->LatestWeights();
  for (int k = 0; k < kShards; ++k) {
    auto mine = c.shards[k]->LatestWeights();
    INFO("shard " << k);
    CHECK(mine->step == one->step);
    for (int i = 0; i < mine->layout->size(); ++i) {
      const int j = one->layout->Find(mine->layout->names[i]);
      REQUIRE(j >= 0);
      auto a = mine->weights[i].span();
      auto b = one->weights[j].span();
      REQUIRE(a.size() == b.size());
      INFO(mine->layout->names[i]);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
  }
}

// Worker w's push for `step` staged on every shard, in `order` of shards.
void StageEverywhere(Cluster& c, int w, int64_t step,
                     const std::vector<int>& order, int64_t generation = 0) {
  for (int k : order) {
    const Tensors g = Make(k, w, step);
    auto r = c.shards[k]->Push(w, step, g.Bytes(VariableKind::kParameter),
                               generation, nullptr, PushId(w, step));
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->staged);
  }
}

// The commit on shard 0 and the same push to the one shard agree.
void CommitBoth(Cluster& c, int w, int64_t step, int64_t generation = 0) {
  auto decided = c.shards[0]->Commit(w, step, generation, PushId(w, step));
  const Tensors g = Make(-1, w, step);
  auto one = c.one->Push(w, step, g.Bytes(VariableKind::kParameter));
  INFO("worker " << w << " step " << step << ": " << decided.status() << " / "
                 << one.status());
  REQUIRE(decided.ok() == one.ok());
  if (!decided.ok()) {
    CHECK(decided.status().code() == one.status().code());
    return;
  }
  CHECK(decided->outcome == one->outcome);
  CHECK(decided->step == one->step);
}

TEST_CASE("sync: every shard takes the same N gradients in the same order") {
  Cluster c = MakeCluster(Mode::kSync);
  std::mt19937 rng(7);
  std::vector<int> shard_order = {0, 1, 2};
  for (int64_t step = 0; step < 24; ++step) {
    std::vector<int> workers = {0, 1, 2, 3};
    std::shuffle(workers.begin(), workers.end(), rng);
    // Every shard stages the pushes in an order of its own: the arrivals
    // that used to make each shard pick its own N (a partly dropped push).
    for (int k = 0; k < kShards; ++k) {
      std::vector<int> arrivals = workers;
      std::shuffle(arrivals.begin(), arrivals.end(), rng);
      for (int w : arrivals) StageEverywhere(c, w, step, {k});
    }
    // The commits decide: the first three complete the step, the fourth
    // is surplus on every shard.
    for (int w : workers) CommitBoth(c, w, step);
    CheckSameBits(c);
    std::shuffle(shard_order.begin(), shard_order.end(), rng);
  }
  // The followers count what shard 0 decided: 24 steps and 24 surplus
  // pushes, each a decision.
  const ShardStatus s0 = c.shards[0]->Status();
  for (int k : {1, 2}) {
    const ShardStatus s = c.shards[k]->Status();
    CHECK(s.step == 24);
    CHECK(s.counters.decisions_applied == 48);
    CHECK(s.counters.applied == s0.counters.applied);
    CHECK(s.counters.aggregated == s0.counters.aggregated);
    CHECK(s.counters.dropped_surplus == s0.counters.dropped_surplus);
  }
}

TEST_CASE("async: every shard applies the same pushes with the same scale") {
  Cluster c = MakeCluster(Mode::kAsync);
  std::mt19937 rng(11);
  std::vector<int64_t> last(kWorkers, -1);
  int refused = 0, applied = 0;
  for (int n = 0; n < 60; ++n) {
    const int w = static_cast<int>(rng() % kWorkers);
    const int64_t now = c.one->Status().step;
    // The step it pulled: up to four behind (beyond max_push_staleness 2).
    const int64_t step =
        std::max<int64_t>(last[w] + 1, now - static_cast<int64_t>(rng() % 5));
    if (step > now) continue;
    StageEverywhere(c, w, step, {2, 0, 1});
    last[w] = step;
    auto before = c.one->Status().counters;
    CommitBoth(c, w, step);
    auto after = c.one->Status().counters;
    applied += after.applied - before.applied;
    refused += after.refused_too_stale - before.refused_too_stale;
    CheckSameBits(c);
  }
  CHECK(applied > 10);
  CHECK(refused > 0);
}

TEST_CASE(
    "a follower refuses decisions it cannot apply, naming step and shard") {
  auto follower = MakeShard(Options(Mode::kSync, 1, 2), 1);
  const Tensors g = Make(1, 0, 0);
  REQUIRE(follower->Push(0, 0, g.Bytes(VariableKind::kParameter), 0, nullptr, 5)
              .ok());
  Decision d;
  d.seq = 1;
  d.kind = Decision::Kind::kSyncStep;
  d.step = 0;
  d.workers = {0};
  d.push_ids = {5};
  SECTION("a gap") {
    d.seq = 2;
    auto r = follower->ApplyDecisions(1, {d});
    CHECK(absl::IsFailedPrecondition(r.status()));
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("shard 1") && Catch::Contains("step 0") &&
                   Catch::Contains("missing"));
  }
  SECTION("a worker id out of range") {
    d.kind = Decision::Kind::kLeft;
    d.workers = {kWorkers + 5};
    auto r = follower->ApplyDecisions(1, {d});
    CHECK(absl::IsFailedPrecondition(r.status()));
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("shard 1") && Catch::Contains("step 0"));
    CHECK(follower->Status().live_workers.size() == kWorkers);
  }
  SECTION("another generation") {
    CHECK(absl::IsAborted(follower->ApplyDecisions(2, {d}).status()));
  }
  SECTION("a push it has not staged") {
    d.push_ids = {6};
    auto r = follower->ApplyDecisions(1, {d});
    CHECK(absl::IsFailedPrecondition(r.status()));
    CHECK_THAT(std::string(r.status().message()),
               Catch::Contains("shard 1") && Catch::Contains("not staged"));
    CHECK(follower->Status().step == 0);
  }
  SECTION("a step it has moved past, and a repeat that disagrees") {
    auto r = follower->ApplyDecisions(1, {d});
    REQUIRE(r.ok());
    CHECK(*r == 1);
    CHECK(follower->Status().step == 1);
    CHECK(follower->ApplyDecisions(1, {d}).ok());  // a repeat: nothing
    CHECK(follower->Status().step == 1);
    Decision other = d;
    other.step = 5;
    auto disagrees = follower->ApplyDecisions(1, {other});
    CHECK(absl::IsFailedPrecondition(disagrees.status()));
    CHECK_THAT(std::string(disagrees.status().message()),
               Catch::Contains("disagrees") && Catch::Contains("step 5"));
    Decision past = d;
    past.seq = 2;
    auto moved = follower->ApplyDecisions(1, {past});
    CHECK(absl::IsFailedPrecondition(moved.status()));
    CHECK_THAT(std::string(moved.status().message()),
               Catch::Contains("step 0") && Catch::Contains("shard 1"));
    CHECK(follower->Status().step == 1);
  }
  SECTION("only shard 0 decides") {
    auto r = follower->Commit(0, 0, 0, 5);
    CHECK(absl::IsFailedPrecondition(r.status()));
  }
}

TEST_CASE("a commit of a push not staged is refused and changes nothing") {
  Cluster c = MakeCluster(Mode::kSync);
  auto r = c.shards[0]->Commit(0, 0, 0, PushId(0, 0));
  CHECK(absl::IsFailedPrecondition(r.status()));
  CHECK(c.shards[0]->Status().pending_gradients == 0);
}

void FlushAll(Cluster& c) {
  for (auto& s : c.shards) s->FlushCheckpoints();
}

void RollbackAll(Cluster& c, int64_t label, int64_t generation) {
  for (auto& s : c.shards) {
    auto r = s->Rollback(label, generation);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
  }
}

void Step(Cluster& c, int64_t step, int64_t generation) {
  for (int w = 0; w < kWorkers; ++w) {
    StageEverywhere(c, w, step, {1, 2, 0}, generation);
  }
  for (int w : {3, 1, 0, 2}) CommitBoth(c, w, step, generation);
  CheckSameBits(c);
}

TEST_CASE(
    "a shard killed between staging and decision: consistent after the "
    "rollback, no hang") {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           absl::StrCat("coordination_test_", getpid()))
                              .string();
  std::filesystem::remove_all(dir);
  Cluster c = MakeCluster(Mode::kSync, dir);
  Step(c, 0, 0);
  Step(c, 1, 0);
  FlushAll(c);  // checkpoint step-2 on every shard

  // ps:1 dies after staging the step-2 pushes; it restarts from step-2.
  for (int w = 0; w < kWorkers; ++w) StageEverywhere(c, w, 2, {0, 1, 2});
  c.shards[1].reset();
  c.shards[1] = MakeShard(Options(Mode::kSync, 1, kShards, dir), 1);
  CHECK(c.shards[1]->restore_report().label == 2);
  c.Link();
  // Shard 0 decides step 2; ps:1 cannot take it (awaiting the rollback).
  for (int w : {0, 1, 2})
    REQUIRE(c.shards[0]->Commit(w, 2, 0, PushId(w, 2)).ok());
  CHECK(c.shards[0]->Status().step == 3);
  CHECK_FALSE(c.shards[0]->AwaitDecisionsDelivered(absl::Now() +
                                                   absl::Milliseconds(300)));
  // The cluster rolls back to step-2: every shard there, the old decisions
  // dropped, nothing waits.
  RollbackAll(c, 2, 2);
  CHECK(c.shards[0]->AwaitDecisionsDelivered(absl::Now() + absl::Seconds(10)));
  CheckSameBits(c);  // the one shard never took step 2
  Step(c, 2, 2);
  Step(c, 3, 2);
  FlushAll(c);  // checkpoint step-4

  // The coordinator dies after every shard staged the step-4 pushes.
  for (int w = 0; w < kWorkers; ++w) StageEverywhere(c, w, 4, {2, 1, 0}, 2);
  c.shards[0].reset();
  c.shards[0] = MakeShard(Options(Mode::kSync, 0, kShards, dir), 0);
  CHECK(c.shards[0]->restore_report().label == 4);
  c.Link();
  RollbackAll(c, 4, 3);
  for (auto& s : c.shards) CHECK(s->Status().step == 4);
  CheckSameBits(c);
  Step(c, 4, 3);
  Step(c, 5, 3);
  c.shards.clear();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
