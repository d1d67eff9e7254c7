#include "ps/testing/ps_client_test_util.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/dtype_convert.h"
#include "common/mutex.h"
#include "ps/client/parts.h"
#include "ps/state/optimizer.h"

namespace psgd {
namespace ps {
namespace testing {
namespace {

// A whole model's values, in ScenarioModel() order.
using Model = std::vector<std::vector<float>>;

Model ZeroModel(const std::vector<VariableSpec>& specs) {
  Model m;
  for (const VariableSpec& s : specs) m.emplace_back(NumElements(s.shape));
  return m;
}

// Multiples of 1/1024 below 1/32: every sum of a few of them is exact in
// float32, so the replay's sums equal the shard's in any order.
Model Gradient(const std::vector<VariableSpec>& specs, int worker, int64_t k) {
  Model g = ZeroModel(specs);
  for (size_t v = 0; v < g.size(); ++v) {
    for (size_t i = 0; i < g[v].size(); ++i) {
      g[v][i] =
          static_cast<float>((worker * 31 + k * 7 + i * 3 + v) % 33) / 1024.0f -
          16.0f / 1024.0f;
    }
  }
  return g;
}

std::vector<NamedConstTensorView> ConstViews(
    const std::vector<VariableSpec>& specs, const Model& m) {
  std::vector<NamedConstTensorView> out;
  for (size_t v = 0; v < specs.size(); ++v) {
    out.push_back(
        {specs[v].name, ConstTensorView(m[v].data(), specs[v].shape)});
  }
  return out;
}

std::vector<NamedTensorView> Views(const std::vector<VariableSpec>& specs,
                                   Model& m) {
  std::vector<NamedTensorView> out;
  for (size_t v = 0; v < specs.size(); ++v) {
    out.push_back({specs[v].name, TensorView(m[v].data(), specs[v].shape)});
  }
  return out;
}

// What one worker's push did.
struct PushRecord {
  int worker = 0;
  int64_t k = 0;
  ModelVersion version;
  PushResult result;
};

// Counts workers that have joined; all start pushing once all have joined
// (a sync step needs only min(N, live) gradients: a worker pushing before
// the others joined would complete steps alone).
class JoinBarrier {
 public:
  explicit JoinBarrier(int n) : left_(n) {}
  // False when the deadline passed first.
  bool ArriveAndWait(absl::Time deadline) {
    MutexLock lock(&mu_);
    if (--left_ == 0) cv_.SignalAll();
    return cv_.WaitUntil(&mu_, deadline, [this]() {
      mu_.AssertHeld();
      return left_ <= 0;
    });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int left_ ABSL_GUARDED_BY(mu_);
};

// A push in parts, one per variable, the last variable first; each shard's
// reply is that of the part that completed its push.
absl::StatusOr<PushResult> PushInParts(
    PsClient& client, const ModelVersion& version,
    const std::vector<NamedConstTensorView>& gradients) {
  PushResult merged = NoReplies(client.num_shards());
  ModelVersion push = version;
  push.push_id = NewPushId();
  for (auto it = gradients.rbegin(); it != gradients.rend(); ++it) {
    absl::StatusOr<PushResult> r = client.PushPart(push, {*it});
    if (!r.ok()) return r.status();
    MergePartReplies(*r, &merged);
  }
  // With several shards the parts were staged: shard 0 decides the push.
  if (client.num_shards() > 1) return client.CommitPush(push);
  return merged;
}

// One pull per variable, each on a thread of its own; a whole pull when a
// shard moved between them, as the cluster worker does.
absl::StatusOr<ModelVersion> PullInParts(
    PsClient& client, const ModelVersion& wanted, absl::Time deadline,
    const std::vector<NamedTensorView>& out) {
  std::vector<absl::StatusOr<ModelVersion>> got(
      out.size(), absl::UnknownError("not pulled"));
  std::vector<std::thread> threads;
  for (size_t j = 0; j < out.size(); ++j) {
    threads.emplace_back(
        [&, j] { got[j] = client.PullPart(wanted, deadline, {out[j]}); });
  }
  for (std::thread& t : threads) t.join();
  std::vector<ModelVersion> parts;
  for (const absl::StatusOr<ModelVersion>& v : got) {
    if (!v.ok()) return v.status();
    parts.push_back(*v);
  }
  absl::StatusOr<ModelVersion> version =
      MergePartVersions(parts, client.num_shards());
  if (absl::IsFailedPrecondition(version.status())) {
    return client.Pull(wanted, deadline, out);
  }
  return version;
}

// One worker's loop; returns its records or the first error.
absl::Status WorkerLoop(const Scenario& sc, PsClient& client, int worker,
                        JoinBarrier& barrier,
                        std::vector<PushRecord>* records) {
  const std::vector<VariableSpec> specs = ScenarioModel();
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  const int shards = client.num_shards();
  Model weights = ZeroModel(specs);
  if (absl::Status s = client.Join(); !s.ok()) return s;
  if (!barrier.ArriveAndWait(deadline)) {
    return absl::DeadlineExceededError("the other workers did not join");
  }
  absl::StatusOr<ModelVersion> version = client.Pull(
      ModelVersion::AtLeast(shards, 0), deadline, Views(specs, weights));
  // Sync stops at global step K as TensorFlow's workers do (at most 4K
  // pushes, in case of a bug); async after K pushes of its own.
  const int max_pushes = sc.mode == Mode::kSync ? 4 * sc.steps : sc.steps;
  for (int64_t k = 0; k < max_pushes && version.ok(); ++k) {
    if (sc.mode == Mode::kSync &&
        *std::min_element(version->steps.begin(), version->steps.end()) >=
            sc.steps) {
      break;
    }
    const Model g = Gradient(specs, worker, k);
    absl::StatusOr<PushResult> r =
        sc.parts ? PushInParts(client, *version, ConstViews(specs, g))
                 : client.Push(*version, ConstViews(specs, g));
    if (!r.ok()) return r.status();
    records->push_back({worker, k, *version, *std::move(r)});
    if (k + 1 == max_pushes) break;  // nothing more to push: leave
    const ModelVersion wanted = sc.mode == Mode::kSync
                                    ? version->Next()
                                    : ModelVersion::AtLeast(shards, 0);
    version = sc.parts
                  ? PullInParts(client, wanted, deadline, Views(specs, weights))
                  : client.Pull(wanted, deadline, Views(specs, weights));
    // Sync: a pull may read shard 0 a step before shard 1 applied its
    // decision, or the reverse; line up at the newest step as the worker
    // session does (its next gradient is then of one step of every shard).
    if (sc.mode == Mode::kSync && version.ok()) {
      const int64_t newest =
          *std::max_element(version->steps.begin(), version->steps.end());
      if (*std::min_element(version->steps.begin(), version->steps.end()) !=
          newest) {
        version = client.Pull(ModelVersion::AtLeast(shards, newest), deadline,
                              Views(specs, weights));
      }
    }
  }
  if (!version.ok()) return version.status();
  return client.Leave();
}

// Replays shard `shard`'s accepted gradients on the whole model.
Model Replay(const Scenario& sc, const std::vector<VariableSpec>& specs,
             const Model& initial, const std::vector<PushRecord>& records,
             int shard, int64_t final_step) {
  Model w;
  for (const auto& v : initial) w.push_back(v);
  std::vector<int64_t> sizes;
  for (const auto& v : w) sizes.push_back(static_cast<int64_t>(v.size()));
  auto adam = *CreateOptimizer(ScenarioOptions(sc, 0, 1).optimizer, sizes);
  // Step (1-based in async: the step after the push) -> gradients.
  std::map<int64_t, std::vector<const PushRecord*>> by_step;
  for (const PushRecord& r : records) {
    const PushReply& reply = r.result.shards[shard];
    if (reply.outcome == PushOutcome::kAggregated ||
        reply.outcome == PushOutcome::kApplied) {
      // Sync: the step shard 0 took it into, for every shard (its decision
      // is theirs).
      by_step[sc.mode == Mode::kSync ? r.version.steps[0] : reply.step]
          .push_back(&r);
    }
  }
  CHECK(static_cast<int64_t>(by_step.size()) == final_step);
  for (const auto& [step, pushes] : by_step) {
    Model mean = ZeroModel(specs);
    for (const PushRecord* p : pushes) {
      const Model g = Gradient(specs, p->worker, p->k);
      for (size_t v = 0; v < g.size(); ++v) {
        for (size_t i = 0; i < g[v].size(); ++i) mean[v][i] += g[v][i];
      }
    }
    const float n = static_cast<float>(pushes.size());
    for (auto& v : mean) {
      for (float& x : v) x /= n;
    }
    double scale = 1.0;
    if (sc.scale_lr_by_staleness) {
      scale =
          1.0 / std::max<int64_t>(1, pushes[0]->result.shards[shard].staleness);
    }
    std::vector<const float*> in, grads;
    std::vector<float*> out;
    for (size_t v = 0; v < w.size(); ++v) {
      in.push_back(w[v].data());
      grads.push_back(mean[v].data());
      out.push_back(w[v].data());
    }
    adam->Apply(in, grads, out, scale);
  }
  return w;
}

}  // namespace

std::vector<VariableSpec> ScenarioModel() {
  return {{"w", {64, 8}, Initializer::Constant(0)},  // 2 KiB: split
          {"b", {8}, Initializer::Constant(0)},
          {"v", {16, 4}, Initializer::Constant(0)}};
}

Scenario SyncScenario(int workers, int steps) {
  return BackupScenario(workers, workers, steps);
}

Scenario BackupScenario(int workers, int replicas_to_aggregate, int steps) {
  Scenario sc;
  sc.workers = workers;
  sc.replicas_to_aggregate = replicas_to_aggregate;
  sc.steps = steps;
  return sc;
}

Scenario AsyncScenario(int workers, int steps, bool scale_lr_by_staleness) {
  Scenario sc;
  sc.mode = Mode::kAsync;
  sc.workers = workers;
  sc.replicas_to_aggregate = 1;
  sc.steps = steps;
  sc.scale_lr_by_staleness = scale_lr_by_staleness;
  return sc;
}

ShardOptions ScenarioOptions(const Scenario& sc, int shard_index,
                             int num_shards) {
  ShardOptions o;
  o.shard_index = shard_index;
  o.num_shards = num_shards;
  o.cluster_name = "scenario";
  o.mode = sc.mode;
  o.total_num_replicas = sc.workers;
  o.replicas_to_aggregate =
      sc.mode == Mode::kSync ? sc.replicas_to_aggregate : 1;
  o.scale_lr_by_staleness = sc.scale_lr_by_staleness;
  o.staleness_bound = sc.staleness_bound;
  o.optimizer.learning_rate = 0.01;
  o.split_threshold_bytes = kScenarioSplitThreshold;
  return o;
}

namespace {

// The scenario's initial values: multiples of 1/64 in [-1/8, 1/8).
Model ScenarioInitial(const std::vector<VariableSpec>& specs) {
  Model initial = ZeroModel(specs);
  for (size_t v = 0; v < initial.size(); ++v) {
    for (size_t i = 0; i < initial[v].size(); ++i) {
      initial[v][i] = static_cast<float>((i * 13 + v) % 17) / 64.0f - 0.125f;
    }
  }
  return initial;
}

// Runs the scenario's workers, each with a client of its own, to the end;
// every push they made, in no particular order.
std::vector<PushRecord> RunWorkers(const Scenario& sc,
                                   const ClientFactory& make_client) {
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < sc.workers; ++w) {
    clients.push_back(make_client(w));
    REQUIRE(clients.back() != nullptr);
  }
  std::vector<std::vector<PushRecord>> records(sc.workers);
  std::vector<absl::Status> results(sc.workers);
  std::vector<std::thread> threads;
  JoinBarrier barrier(sc.workers);
  for (int w = 0; w < sc.workers; ++w) {
    threads.emplace_back([&, w] {
      results[w] = WorkerLoop(sc, *clients[w], w, barrier, &records[w]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < sc.workers; ++w) {
    INFO("worker " << w << ": " << results[w].ToString());
    REQUIRE(results[w].ok());
    // Sync N=M is lockstep: every worker pushes once per step.
    if (sc.mode == Mode::kAsync || sc.replicas_to_aggregate == sc.workers) {
      REQUIRE(static_cast<int>(records[w].size()) == sc.steps);
    }
  }
  std::vector<PushRecord> all;
  for (auto& r : records) all.insert(all.end(), r.begin(), r.end());
  return all;
}

// Shard 0's last decisions may still be on their way to the others (a
// surplus push's drop changes neither step nor applied): waits (bounded)
// until every shard has accounted for all `total` pushes the workers made.
std::vector<ShardStatus> SettledStatuses(PsClient& chief, int64_t total) {
  absl::StatusOr<std::vector<ShardStatus>> statuses;
  const absl::Time settle = absl::Now() + absl::Seconds(30);
  for (;;) {
    statuses = chief.Status();
    REQUIRE(statuses.ok());
    bool settled = true;
    for (const ShardStatus& s : *statuses) {
      const PushCounters& c = s.counters;
      settled &=
          s.step == (*statuses)[0].step &&
          c.applied == (*statuses)[0].counters.applied &&
          s.pending_gradients == 0 &&
          c.aggregated + c.applied + c.dropped_stale + c.dropped_surplus >=
              total;
    }
    if (settled || absl::Now() > settle) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return *std::move(statuses);
}

// Shard `shard`'s counters and step against the scenario's arithmetic.
void CheckShardCounts(const Scenario& sc, const ShardStatus& s,
                      const ShardStatus& shard0, int64_t total) {
  const PushCounters& c = s.counters;
  CHECK(c.aggregated + c.applied + c.dropped_stale + c.dropped_surplus ==
        total);
  CHECK(c.refused == 0);
  CHECK(s.pending_gradients == 0);
  if (sc.mode == Mode::kAsync) {
    CHECK(s.step == static_cast<int64_t>(sc.workers) * sc.steps);
  } else if (sc.replicas_to_aggregate == sc.workers) {
    CHECK(s.step == sc.steps);
  } else {
    // With backup workers a worker stops when every shard is >= K;
    // shard 0 decides every step, so all shards are at the same one.
    CHECK(s.step >= sc.steps);
    CHECK(s.step == shard0.step);
  }
  CHECK(s.step == c.applied + c.completed_by_leave);
}

}  // namespace

void RunScenario(const Scenario& sc, const ClientFactory& make_client) {
  const std::vector<VariableSpec> specs = ScenarioModel();
  std::unique_ptr<PsClient> chief = make_client(-1);
  REQUIRE(chief != nullptr);
  const int shards = chief->num_shards();
  const Model initial = ScenarioInitial(specs);
  REQUIRE(chief->Initialize(ConstViews(specs, initial)).ok());

  const std::vector<PushRecord> all = RunWorkers(sc, make_client);
  const int64_t total = static_cast<int64_t>(all.size());
  const std::vector<ShardStatus> statuses = SettledStatuses(*chief, total);
  Model final_weights = ZeroModel(specs);
  REQUIRE(chief
              ->Pull(ModelVersion::AtLeast(shards, 0),
                     absl::Now() + absl::Seconds(30),
                     Views(specs, final_weights))
              .ok());
  const Placement& placement = chief->placement();
  for (int shard = 0; shard < shards; ++shard) {
    INFO("shard " << shard << " at step " << statuses[shard].step);
    CheckShardCounts(sc, statuses[shard], statuses[0], total);
    const Model replay =
        Replay(sc, specs, initial, all, shard, statuses[shard].step);
    for (int slice : placement.shard_slices[shard]) {
      const Slice& sl = placement.slices[slice];
      for (int64_t i = sl.offset; i < sl.offset + sl.num_elements; ++i) {
        if (final_weights[sl.variable][i] != replay[sl.variable][i]) {
          FAIL("slice " << sl.name << " element " << i << ": "
                        << final_weights[sl.variable][i] << " != replay "
                        << replay[sl.variable][i]);
        }
      }
    }
  }
}

std::vector<NamedConstTensorView> ScenarioValues::Const() const {
  return {{"w", ConstTensorView(w.data(), {64, 8})},
          {"b", ConstTensorView(b.data(), {8})},
          {"v", ConstTensorView(v.data(), {16, 4})}};
}

std::vector<NamedTensorView> ScenarioValues::Mutable() {
  return {{"w", TensorView(w.data(), {64, 8})},
          {"b", TensorView(b.data(), {8})},
          {"v", TensorView(v.data(), {16, 4})}};
}

ScenarioValues TwoWireSteps(const ClientFactory& make_client) {
  ScenarioValues init;
  for (size_t i = 0; i < init.w.size(); ++i) init.w[i] = 0.01f * i - 1.7f;
  REQUIRE(make_client(-1)->Initialize(init.Const()).ok());
  std::vector<std::unique_ptr<PsClient>> workers;
  for (int w = 0; w < 2; ++w) {
    workers.push_back(make_client(w));
    REQUIRE(workers.back()->Join().ok());
  }
  ModelVersion v = ModelVersion::AtLeast(2, 0);
  ScenarioValues got;
  for (int step = 0; step < 2; ++step) {
    for (int w = 0; w < 2; ++w) {
      ScenarioValues g;
      for (size_t i = 0; i < g.w.size(); ++i) {
        g.w[i] = std::ldexp(static_cast<float>(i % 5) - 2, -(w + 3 * step));
      }
      REQUIRE(workers[w]->Push(v, g.Const()).ok());
    }
    absl::StatusOr<ModelVersion> next = workers[0]->Pull(
        v.Next(), absl::Now() + absl::Seconds(30), got.Mutable());
    REQUIRE(next.ok());
    v = *next;
  }
  CHECK(v.steps == std::vector<int64_t>{2, 2});
  return got;
}

namespace {

// Polls the shards' status until each holds `pulls` waiting pulls (a
// cancelled gRPC call reaches the server in its own time); false after 30 s.
bool AwaitPullsWaiting(PsClient* client, int pulls) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    absl::StatusOr<std::vector<ShardStatus>> status = client->Status();
    REQUIRE(status.ok());
    if (std::all_of(status->begin(), status->end(), [&](const ShardStatus& s) {
          return s.pulls_waiting == pulls;
        })) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

}  // namespace

void CheckInterruptedPulls(const ClientFactory& make_client) {
  ScenarioValues init;
  std::unique_ptr<PsClient> chief = make_client(-1);
  REQUIRE(chief->Initialize(init.Const()).ok());
  std::unique_ptr<PsClient> w0 = make_client(0);
  std::unique_ptr<PsClient> w1 = make_client(1);
  REQUIRE(w0->Join().ok());
  REQUIRE(w1->Join().ok());
  const ModelVersion v0 = ModelVersion::AtLeast(2, 0);
  REQUIRE(w0->Push(v0, init.Const()).ok());

  // Worker 0's pull for step 1 waits for worker 1's push on both shards.
  ScenarioValues got;
  absl::StatusOr<ModelVersion> waited;
  std::thread puller([&] {
    waited =
        w0->Pull(v0.Next(), absl::Now() + absl::Seconds(60), got.Mutable());
  });
  REQUIRE(AwaitPullsWaiting(chief.get(), 1));
  w0->InterruptPulls();
  // The shards let go of it, long before its deadline.
  CHECK(AwaitPullsWaiting(chief.get(), 0));
  puller.join();
  CHECK(waited.status().code() == absl::StatusCode::kCancelled);
  CHECK(absl::StrContains(waited.status().message(), "interrupted"));

  // Until ResumePulls a pull is refused at once; the other calls go on.
  absl::StatusOr<ModelVersion> refused =
      w0->Pull(v0.Next(), absl::Now() + absl::Seconds(60), got.Mutable());
  CHECK(refused.status().code() == absl::StatusCode::kCancelled);
  CHECK(AwaitPullsWaiting(chief.get(), 0));
  CHECK(w0->Status().ok());
  absl::StatusOr<PushResult> pushed = w1->Push(v0, init.Const());
  REQUIRE(pushed.ok());
  CHECK(pushed->shards[0].outcome == PushOutcome::kApplied);

  w0->ResumePulls();
  absl::StatusOr<ModelVersion> resumed =
      w0->Pull(v0.Next(), absl::Now() + absl::Seconds(60), got.Mutable());
  REQUIRE(resumed.ok());
  CHECK(resumed->steps == std::vector<int64_t>{1, 1});
}

void CheckWireDTypes(const WireRun& run) {
  const ScenarioValues exact = run(DType::kFloat32, DType::kFloat32);
  // Gradients exact in 16 bits: the servers' float32 weights are the same
  // bits as with float32 on the wire.
  const ScenarioValues grads16 = run(DType::kBFloat16, DType::kFloat32);
  CHECK(grads16.w == exact.w);
  CHECK(run(DType::kFloat16, DType::kFloat32).w == exact.w);
  // Weights sent as bfloat16 are the server's float32 weights rounded.
  const ScenarioValues bf16 = run(DType::kBFloat16, DType::kBFloat16);
  for (size_t i = 0; i < exact.w.size(); ++i) {
    INFO(i);
    CHECK(bf16.w[i] == BFloat16ToFloatRef(FloatToBFloat16Ref(exact.w[i])));
  }
  CHECK(bf16.w != exact.w);  // (the test would see no rounding otherwise)
  // float16 with the tensor's scale: within float16's relative precision.
  const ScenarioValues fp16 = run(DType::kFloat16, DType::kFloat16);
  for (size_t i = 0; i < exact.w.size(); ++i) {
    INFO(i);
    CHECK(std::fabs(fp16.w[i] - exact.w[i]) <=
          std::fabs(exact.w[i]) * (1.0f / 2048) + 1e-6f);
  }
}

}  // namespace testing
}  // namespace ps
}  // namespace psgd
