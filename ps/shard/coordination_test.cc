// One decision per push across every shard (docs/PS.md, "One decision per
// push"): three shards and four workers, with the order in which every
// shard stages the pushes and the order of the commits chosen by the test,
// must hold the same weights, bit for bit, as one shard holding the whole
// model that saw the pushes in the commit order; async the same, with the
// same pushes applied and refused. Also: refused decisions, a
// non-coordinating shard and the coordinator killed between the staging and
// the decision, which staged pushes a decision takes along (and which it
// leaves), the limit of a worker's pushes awaiting decisions, and followers
// that expire no lease and choose no N.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
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

ShardOptions Options(Mode mode, int shard, int num_shards,
                     const std::string& checkpoints = "") {
  ShardOptions o;
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

std::unique_ptr<ParameterShard> MakeShard(const ShardOptions& o, int holds) {
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
  // The pushes staged in memory the shard keeps (ParameterShard::Push's
  // `keep`, as a gRPC push's message), to see that the stage lets go.
  std::vector<std::weak_ptr<const Tensors>> kept;

  bool AllKeptReleased() const {
    for (const auto& k : kept) {
      if (!k.expired()) return false;
    }
    return true;
  }

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
// Odd workers' gradients are staged where they lie, the shard keeping them
// (as a gRPC push's parsed message), even workers' as copies.
void StageEverywhere(Cluster& c, int w, int64_t step,
                     const std::vector<int>& order, int64_t generation = 0) {
  for (int k : order) {
    auto g = std::make_shared<const Tensors>(Make(k, w, step));
    const bool borrow = w % 2 == 1;
    auto r = c.shards[k]->Push(w, step, g->Bytes(VariableKind::kParameter),
                               generation, nullptr, PushId(w, step),
                               borrow ? g : nullptr);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->staged);
    // Kept by the stage until the decision (a hold a gradient), or let go
    // (the copies).
    CHECK(g.use_count() ==
          (borrow ? 1 + static_cast<long>(g->names.size()) : 1));
    if (borrow) c.kept.push_back(g);
  }
}

// The commit on shard 0 and the same push to the one shard agree (`id`: the
// push's id, 0 for PushId(w, step)).
void CommitBoth(Cluster& c, int w, int64_t step, int64_t generation = 0,
                uint64_t id = 0) {
  auto decided =
      c.shards[0]->Commit(w, step, generation, id != 0 ? id : PushId(w, step));
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
  // Every push was decided (applied or surplus): no shard keeps any.
  CHECK(!c.kept.empty());
  CHECK(c.AllKeptReleased());
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
  CHECK(!c.kept.empty());
  CHECK(c.AllKeptReleased());
}

// Shard 1 of 2 with worker 0's push 5 for step 0 staged, and the decision
// that applies it.
struct StagedFollower {
  StagedFollower() : follower(MakeShard(Options(Mode::kSync, 1, 2), 1)) {
    const Tensors g = Make(1, 0, 0);
    REQUIRE(
        follower->Push(0, 0, g.Bytes(VariableKind::kParameter), 0, nullptr, 5)
            .ok());
    d.seq = 1;
    d.kind = Decision::Kind::kSyncStep;
    d.step = 0;
    d.workers = {0};
    d.push_ids = {5};
  }
  std::unique_ptr<ParameterShard> follower;
  Decision d;
};

TEST_CASE(
    "a follower refuses decisions it cannot apply, naming step and shard") {
  StagedFollower sf;
  auto& follower = sf.follower;
  Decision& d = sf.d;
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
  SECTION("only shard 0 decides") {
    auto r = follower->Commit(0, 0, 0, 5);
    CHECK(absl::IsFailedPrecondition(r.status()));
  }
}

TEST_CASE("a follower refuses a decision of a step it has moved past") {
  StagedFollower sf;
  auto& follower = sf.follower;
  const Decision& d = sf.d;
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
}

TEST_CASE("a follower refuses numbers no shard 0 makes") {
  StagedFollower sf;
  auto& follower = sf.follower;
  const Decision& d = sf.d;
  SECTION("numbers no shard 0 makes: refused, nothing applied") {
    // What forged decisions once applied: lr_scale NaN made every weight NaN,
    // N of 2^31 - 1 was taken, a step of two workers' pushes "async".
    struct Forged {
      const char* field;
      Decision d;
    };
    std::vector<Forged> forged;
    for (double scale : {std::nan(""), 0.0, -1.0, kWorkers + 1.0,
                         std::numeric_limits<double>::infinity()}) {
      forged.push_back({"lr_scale", d});
      forged.back().d.lr_scale = scale;
    }
    forged.push_back({"staleness", d});
    forged.back().d.staleness = -1;
    forged.push_back({"replicas_next", d});
    forged.back().d.replicas_next = 2147483647;
    forged.push_back({"pushes", d});
    forged.back().d.kind = Decision::Kind::kAsyncPush;
    forged.back().d.workers = {0, 1};
    forged.back().d.push_ids = {5, 5};
    forged.push_back({"pushes", d});
    forged.back().d.workers = {0, 1, 2, 3, 0};
    forged.back().d.push_ids = {5, 5, 5, 5, 5};
    for (const Forged& f : forged) {
      INFO(f.field << " " << f.d.lr_scale);
      auto r = follower->ApplyDecisions(1, {f.d});
      CHECK(absl::IsFailedPrecondition(r.status()));
      CHECK_THAT(std::string(r.status().message()),
                 Catch::Contains("shard 1") && Catch::Contains(f.field));
      CHECK(follower->Status().step == 0);
      CHECK(follower->Status().counters.decisions_applied == 0);
    }
    // The push is still staged: the real decision applies.
    REQUIRE(follower->ApplyDecisions(1, {d}).ok());
    CHECK(follower->Status().step == 1);
  }
}

TEST_CASE("a follower refuses a decision older than its window") {
  StagedFollower sf;
  auto& follower = sf.follower;
  SECTION("a sequence number older than the window is an error") {
    // 1,025 decisions applied (a worker leaving, again and again): the
    // first falls out of the 1,024 kept, and a resend of it is no repeat a
    // relay makes.
    std::vector<Decision> left;
    for (int64_t seq = 1; seq <= 1025; ++seq) {
      Decision l;
      l.seq = seq;
      l.kind = Decision::Kind::kLeft;
      l.workers = {3};
      l.push_ids = {0};
      left.push_back(l);
    }
    auto r = follower->ApplyDecisions(1, left);
    REQUIRE(r.ok());
    CHECK(*r == 1025);
    CHECK(follower->ApplyDecisions(1, {left[1024]}).ok());  // recent: a repeat
    auto old = follower->ApplyDecisions(1, {left[0]});
    CHECK(absl::IsFailedPrecondition(old.status()));
    CHECK_THAT(std::string(old.status().message()),
               Catch::Contains("decision 1 ") && Catch::Contains("older"));
  }
}

// Worker w's whole push for `step` decided by shard 0 from its own part
// (DecidePush), the others having staged theirs, and the same push to the
// one shard: they agree.
absl::StatusOr<PushReply> DecideBoth(Cluster& c, int w, int64_t step,
                                     uint64_t id) {
  const Tensors mine = Make(0, w, step);
  auto decided = c.shards[0]->DecidePush(
      w, step, mine.Bytes(VariableKind::kParameter), 0, id);
  const Tensors g = Make(-1, w, step);
  auto one = c.one->Push(w, step, g.Bytes(VariableKind::kParameter));
  INFO("worker " << w << " step " << step << ": " << decided.status() << " / "
                 << one.status());
  REQUIRE(decided.ok() == one.ok());
  if (decided.ok()) {
    CHECK(decided->outcome == one->outcome);
    CHECK(decided->step == one->step);
  } else {
    CHECK(decided.status().code() == one.status().code());
  }
  return decided;
}

TEST_CASE("DecidePush: shard 0 decides a whole push from its own part") {
  Cluster c = MakeCluster(Mode::kSync);
  std::mt19937 rng(11);
  for (int64_t step = 0; step < 8; ++step) {
    std::vector<int> workers = {0, 1, 2, 3};
    std::shuffle(workers.begin(), workers.end(), rng);
    for (int w : workers) {
      StageEverywhere(c, w, step, {2, 1});  // not on shard 0
      REQUIRE(DecideBoth(c, w, step, PushId(w, step)).ok());
      if (w == workers[0]) {
        // A second push of the worker for the step (a retry that sent it
        // again under a new id): refused by shard 0's rules, and its staged
        // copies go alone, the first still in the step's aggregate.
        const uint64_t again = PushId(w, step) + 1000;
        for (int k : {1, 2}) {
          const Tensors t = Make(k, w, step);
          REQUIRE(c.shards[k]
                      ->Push(w, step, t.Bytes(VariableKind::kParameter), 0,
                             nullptr, again)
                      .ok());
        }
        auto second = DecideBoth(c, w, step, again);
        CHECK(absl::IsFailedPrecondition(second.status()));
        CHECK_THAT(std::string(second.status().message()),
                   Catch::Contains("already pushed for step"));
      }
    }
    CheckSameBits(c);
  }
  // Nothing staged on shard 0, nothing left on the others.
  CHECK(c.shards[0]->Status().memory.staged_parts == 0);
  CHECK(c.shards[0]->Status().counters.staged == 0);
  for (int k : {1, 2}) {
    CHECK(c.shards[k]->Status().step == 8);
  }
}

TEST_CASE("DecidePush is refused but on shard 0, and without a push id") {
  Cluster c = MakeCluster(Mode::kSync);
  const Tensors part1 = Make(1, 0, 0);
  auto follower = c.shards[1]->DecidePush(
      0, 0, part1.Bytes(VariableKind::kParameter), 0, PushId(0, 0));
  CHECK(absl::IsFailedPrecondition(follower.status()));
  CHECK_THAT(std::string(follower.status().message()),
             Catch::Contains("shard 1: push to decide from worker 0 for step "
                             "0: only shard 0"));
  const Tensors all = Make(-1, 0, 0);
  auto lone = c.one->DecidePush(0, 0, all.Bytes(VariableKind::kParameter), 0,
                                PushId(0, 0));
  CHECK(absl::IsFailedPrecondition(lone.status()));
  const Tensors part0 = Make(0, 0, 0);
  auto no_id =
      c.shards[0]->DecidePush(0, 0, part0.Bytes(VariableKind::kParameter), 0,
                              /*push_id=*/0);
  CHECK(absl::IsInvalidArgument(no_id.status()));
  CHECK_THAT(std::string(no_id.status().message()), Catch::Contains("push_id"));
  // Nothing moved but the refusal counters.
  for (ParameterShard* s :
       {c.shards[0].get(), c.shards[1].get(), c.one.get()}) {
    const ShardStatus st = s->Status();
    CHECK(st.step == 0);
    CHECK(st.pending_gradients == 0);
    CHECK(st.counters.aggregated == 0);
    CHECK(st.counters.refused == 1);
  }
}

TEST_CASE("a commit of a push not staged is refused and changes nothing") {
  Cluster c = MakeCluster(Mode::kSync);
  auto r = c.shards[0]->Commit(0, 0, 0, PushId(0, 0));
  CHECK(absl::IsFailedPrecondition(r.status()));
  CHECK(c.shards[0]->Status().pending_gradients == 0);
}

TEST_CASE(
    "a push staged before its worker's lease ran out is refused at its "
    "commit as not staged (kNotStaged), also after a renewal") {
  Cluster c;
  for (int k = 0; k < kShards; ++k) {
    ShardOptions o = Options(Mode::kSync, k, kShards);
    o.worker_lease = absl::Seconds(1);
    c.shards.push_back(MakeShard(o, k));
  }
  c.Link();
  StageEverywhere(c, 2, 0, {0, 1, 2});
  // Worker 2 is paused between its pushes and its commit: shard 0 lets it
  // go (every lease ran out) and drops what it staged; the renewal of its
  // lease (a Join) comes before the commit.
  const absl::Time late = absl::Now() + absl::Hours(1);
  const std::vector<int> gone = c.shards[0]->ExpireWorkers(late);
  CHECK(std::count(gone.begin(), gone.end(), 2) == 1);
  REQUIRE(c.shards[0]->Join(2).ok());
  auto r = c.shards[0]->Commit(2, 0, 0, PushId(2, 0));
  INFO(r.status().ToString());
  CHECK(PushRefusalOf(r.status()) == PushRefusal::kNotStaged);
  CHECK(c.shards[0]->Status().pending_gradients == 0);
  CHECK(c.shards[0]->Status().counters.aggregated == 0);
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

// Worker w's push `id` staged on shard k alone, tagged with step `tag` (the
// step the worker pulled from that shard), its gradient worker w's of step
// `values`.
absl::StatusOr<PushReply> StageOn(Cluster& c, int k, int w, int64_t tag,
                                  int64_t values, uint64_t id) {
  const Tensors g = Make(k, w, values);
  return c.shards[k]->Push(w, tag, g.Bytes(VariableKind::kParameter), 0,
                           nullptr, id);
}

// The follower's next decision (generation 1), of `kind` for worker w's push
// `id` tagged `step`: what the follower says when asked to apply it.
absl::Status DecideOnFollower(ParameterShard& follower, Decision::Kind kind,
                              int64_t step, int w, uint64_t id) {
  Decision d;
  d.seq = follower.Status().counters.decisions_applied + 1;
  d.kind = kind;
  d.step = step;
  d.workers = {w};
  d.push_ids = {id};
  return follower.ApplyDecisions(1, {d}).status();
}

TEST_CASE(
    "a decided push takes its worker's pushes staged before it along, and no "
    "push shard 0 may still decide") {
  constexpr uint64_t kA = 1001;  // staged everywhere, never committed
  SECTION("async") {
    Cluster c = MakeCluster(Mode::kAsync);
    constexpr uint64_t kB = 1002, kC = 1003;
    // Worker 1's push for step 0, staged before any of worker 0's; its
    // commit comes last.
    StageEverywhere(c, 1, 0, {0, 1, 2});
    // Worker 0 stages A and dies before the commit; restarted, it stages B.
    for (int k = 0; k < kShards; ++k) {
      REQUIRE(StageOn(c, k, 0, 0, 0, kA).ok());
      REQUIRE(StageOn(c, k, 0, 0, 0, kB).ok());
    }
    // Its next push, C, reaches the followers before B's decision does:
    // they still tag it with step 0 (shard 0, once B is applied, step 1).
    for (int k : {1, 2}) REQUIRE(StageOn(c, k, 0, 0, 1, kC).ok());
    CommitBoth(c, 0, 0, 0, kB);
    REQUIRE(StageOn(c, 0, 0, 1, 1, kC).ok());
    CommitBoth(c, 0, 1, 0, kC);
    CommitBoth(c, 1, 0);  // staleness 2
    // Every shard applied B, C and worker 1's push: none of them was
    // dropped before its decision came.
    REQUIRE(
        c.shards[0]->AwaitDecisionsDelivered(absl::Now() + absl::Seconds(10)));
    CheckSameBits(c);
    for (int k : {1, 2}) {
      INFO("shard " << k);
      const ShardStatus s = c.shards[k]->Status();
      CHECK(s.counters.applied == 3);
      CHECK(s.counters.decisions_applied == 3);
    }
    // A was never committed, and with B decided it never will be: shard 0
    // dropped it at B's commit, the followers at B's decision.
    auto late = c.shards[0]->Commit(0, 0, 0, kA);
    CHECK(absl::IsFailedPrecondition(late.status()));
    CHECK_THAT(std::string(late.status().message()),
               Catch::Contains("not staged"));
    for (int k : {1, 2}) {
      INFO("shard " << k);
      const absl::Status s =
          DecideOnFollower(*c.shards[k], Decision::Kind::kAsyncPush, 0, 0, kA);
      CHECK(absl::IsFailedPrecondition(s));
      CHECK_THAT(std::string(s.message()), Catch::Contains("not staged"));
    }
  }
  SECTION("sync: the later push taken, or dropped as surplus") {
    Cluster c = MakeCluster(Mode::kSync);  // N = 3 of 4
    constexpr uint64_t kA3 = 2001;
    // Workers 0 and 3 each stage a push for step 0 and die before the
    // commit; restarted, they push for step 0 again under new ids, as do
    // workers 1 and 2.
    for (int k = 0; k < kShards; ++k) {
      REQUIRE(StageOn(c, k, 0, 0, 0, kA).ok());
      REQUIRE(StageOn(c, k, 3, 0, 0, kA3).ok());
    }
    for (int w = 0; w < kWorkers; ++w) StageEverywhere(c, w, 0, {2, 1, 0});
    // Worker 0's push is taken into step 0; worker 3's comes last: surplus.
    for (int w : {1, 0, 2, 3}) CommitBoth(c, w, 0);
    CheckSameBits(c);
    // Neither A will be decided: a decision naming one, for step 1 where
    // the followers are now, is refused.
    const std::vector<std::pair<int, uint64_t>> never = {{0, kA}, {3, kA3}};
    for (int k : {1, 2}) {
      for (const auto& [w, id] : never) {
        INFO("shard " << k << ", worker " << w);
        const absl::Status s =
            DecideOnFollower(*c.shards[k], Decision::Kind::kSyncStep, 1, w, id);
        CHECK(absl::IsFailedPrecondition(s));
        CHECK_THAT(std::string(s.message()), Catch::Contains("not staged"));
        CHECK(c.shards[k]->Status().step == 1);
      }
    }
  }
}

TEST_CASE(
    "a shard holds 128 pushes of a worker awaiting decisions and answers the "
    "next UNAVAILABLE, changing nothing staged") {
  Cluster c = MakeCluster(Mode::kAsync);
  // Worker 0 stages 128 pushes for step 0 on every shard, none committed.
  for (uint64_t id = 1; id <= 128; ++id) {
    for (int k = 0; k < kShards; ++k) {
      auto r = StageOn(c, k, 0, 0, 0, id);
      REQUIRE(r.ok());
      REQUIRE(r->staged);
    }
  }
  for (int k = 0; k < kShards; ++k) {
    INFO("shard " << k);
    const ShardStatus before = c.shards[k]->Status();
    auto full = StageOn(c, k, 0, 0, 0, 129);
    CHECK(absl::IsUnavailable(full.status()));
    CHECK_THAT(std::string(full.status().message()),
               Catch::Contains("128 pushes of worker 0") &&
                   Catch::Contains("try again"));
    const ShardStatus after = c.shards[k]->Status();
    CHECK(after.counters.staged == before.counters.staged);
    CHECK(after.counters.refused == before.counters.refused + 1);
    // Another worker's push is taken.
    auto other = StageOn(c, k, 1, 0, 0, PushId(1, 0));
    INFO(other.status().ToString());
    REQUIRE(other.ok());
    CHECK(other->staged);
  }
  // The refused push is staged nowhere; the 128th, everywhere: shard 0
  // decides it, every shard applies it and drops the 127 before it.
  auto refused = c.shards[0]->Commit(0, 0, 0, 129);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CommitBoth(c, 0, 0, 0, 128);
  REQUIRE(
      c.shards[0]->AwaitDecisionsDelivered(absl::Now() + absl::Seconds(10)));
  // Room again: worker 0's next push is staged, and decided everywhere, as
  // is worker 1's.
  for (int k = 0; k < kShards; ++k) {
    INFO("shard " << k);
    auto r = StageOn(c, k, 0, 1, 1, 129);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->staged);
  }
  CommitBoth(c, 0, 1, 0, 129);
  CommitBoth(c, 1, 0);
  CheckSameBits(c);
  for (int k : {1, 2}) CHECK(c.shards[k]->Status().counters.applied == 3);
}

TEST_CASE(
    "a follower expires no lease and chooses no N: shard 0's decisions "
    "change its live set and its steps") {
  Cluster c;
  for (int k = 0; k < kShards; ++k) {
    ShardOptions o = Options(Mode::kSync, k, kShards);
    o.worker_lease = absl::Seconds(1);
    o.n_follows_live = true;  // N = live workers - 1
    c.shards.push_back(MakeShard(o, k));
  }
  c.Link();
  ShardOptions one = Options(Mode::kSync, 0, 1);
  one.n_follows_live = true;
  c.one = MakeShard(one, -1);
  for (int w = 0; w < kWorkers; ++w) StageEverywhere(c, w, 0, {0, 1, 2});
  for (int w : {1, 0}) CommitBoth(c, w, 0);  // 2 of N = 3 gathered
  // Workers 0 and 1 wait for step 1 on shard 0 (a waiting worker's lease
  // does not run out); workers 2 and 3 are silent.
  std::atomic<int> answered{0};
  for (int w : {0, 1}) {
    c.shards[0]->PullAsync(
        1, w, [&answered](absl::StatusOr<ParameterShard::Snapshot> s) {
          if (s.ok() && (*s)->step == 1) ++answered;
        });
  }
  REQUIRE(answered == 0);
  const absl::Time late = absl::Now() + absl::Hours(1);  // every lease ran out
  for (int k : {1, 2}) {
    INFO("shard " << k);
    // Four pushes staged, N = 3: nothing expires, no step completes here.
    CHECK(c.shards[k]->ExpireWorkers(late).empty());
    const ShardStatus s = c.shards[k]->Status();
    CHECK(s.live_workers == std::vector<int>{0, 1, 2, 3});
    CHECK(s.workers_expired == 0);
    CHECK(s.replicas_to_aggregate == 3);
    CHECK(s.step == 0);
    CHECK(s.counters.applied == 0);
  }
  // Shard 0 lets workers 2 and 3 go: with 3 live workers N is 2, and the
  // two gradients gathered complete step 0.
  CHECK(c.shards[0]->ExpireWorkers(late) == std::vector<int>{2, 3});
  CHECK(answered == 2);
  for (int w : {2, 3}) REQUIRE(c.one->Leave(w).ok());
  CheckSameBits(c);
  const ShardStatus s0 = c.shards[0]->Status();
  CHECK(s0.step == 1);
  CHECK(s0.workers_expired == 2);
  CHECK(s0.replicas_to_aggregate == 1);
  for (int k : {1, 2}) {
    INFO("shard " << k);
    const ShardStatus s = c.shards[k]->Status();
    CHECK(s.live_workers == std::vector<int>{0, 1});
    CHECK(s.replicas_to_aggregate == 1);
    CHECK(s.step == 1);
    CHECK(s.counters.applied == 1);
    CHECK(s.counters.aggregated == 1);
    CHECK(s.workers_expired == 0);
    CHECK(c.shards[k]->ExpireWorkers(late).empty());
  }
}

}  // namespace
TEST_CASE("adaptive backups: shard 0 chooses N and every shard holds it") {
  // M = 4, N in [1, 4], a window of one step, no warm-up; the arrivals'
  // clock is the test's (whole seconds: the rule's arithmetic is exact).
  double now = 0;
  auto options = [&now](int shard, int num_shards) {
    ShardOptions o = Options(Mode::kSync, shard, num_shards);
    o.replicas_to_aggregate = kWorkers;
    o.adaptive_backups = true;
    o.adaptive = {1, kWorkers, 1, 0};
    o.adaptive_clock = [&now] {
      return absl::UnixEpoch() + absl::Seconds(now);
    };
    return o;
  };
  Cluster c;
  for (int k = 0; k < kShards; ++k) {
    c.shards.push_back(MakeShard(options(k, kShards), k));
  }
  c.Link();
  c.one = MakeShard(options(0, 1), -1);
  for (int w = 0; w < kWorkers; ++w) StageEverywhere(c, w, 0, {2, 1, 0});
  // Step 0 takes all four: two at 1 s, two at 3 s. Offsets {1, 1, 3, 3}:
  // n / T(n) = 1, 2, 1, 4/3: N = 2 for step 1.
  now = 1;
  for (int w : {0, 1}) CommitBoth(c, w, 0);
  now = 3;
  for (int w : {2, 3}) CommitBoth(c, w, 0);
  CheckSameBits(c);
  CHECK(c.one->Status().replicas_to_aggregate == 2);
  for (int k = 0; k < kShards; ++k) {
    INFO("shard " << k);
    const ShardStatus s = c.shards[k]->Status();
    CHECK(s.step == 1);
    CHECK(s.replicas_to_aggregate == 2);  // shard 0's choice
  }
  // Step 1 completes with two gradients on every shard.
  for (int w : {3, 0}) StageEverywhere(c, w, 1, {0, 1, 2});
  now = 4;
  for (int w : {3, 0}) CommitBoth(c, w, 1);
  CheckSameBits(c);
  for (int k = 0; k < kShards; ++k) {
    INFO("shard " << k);
    CHECK(c.shards[k]->Status().step == 2);
  }
}

}  // namespace ps
}  // namespace psgd
