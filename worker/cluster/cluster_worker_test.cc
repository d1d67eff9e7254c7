// The worker loop over in-process parameter-server shards: several workers
// (threads) train the tutorial model on a small synthetic set, sync and
// async, with backup workers and with a worker whose data ends early, each
// without and with overlap. No sockets, so it runs under ThreadSanitizer.
#include "worker/cluster/cluster_worker.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "worker/cluster/cluster_test_util.h"
#include "worker/cluster/local_statistics.h"
#include "worker/models/registry.h"

namespace psgd {
namespace {

using testing::ClusterRun;
using testing::ClusterSetup;
using testing::MeanLoss;
using testing::RunCluster;
using testing::WorkerRun;

// Each case runs without and with overlap (pushes in parts, pulls in
// groups): the same rules give the same counters.
ClusterSetup Setup() {
  ClusterSetup setup;
  const bool overlap = GENERATE(false, true);
  setup.adjust = [overlap](int, ClusterWorkerOptions* o) {
    o->overlap = overlap;
  };
  return setup;
}

void CheckCommon(const ClusterSetup& setup, const ClusterRun& run) {
  double waited = 0.0;
  for (int w = 0; w < setup.workers; ++w) {
    const WorkerRun& r = run.workers[w];
    INFO("worker " << w << ": " << r.result.status().ToString());
    REQUIRE(r.result.ok());
    CHECK(r.result->local_steps == static_cast<int64_t>(r.steps.size()));
    for (const StepRecord& s : r.steps) {
      CHECK(s.step_s >= s.compute_s);
      // The phases make up the step: input, compute, push, the pull less
      // the servers' wait, and that wait.
      CHECK(s.input_s + s.compute_s + s.push_s + s.pull_s + s.wait_s ==
            Approx(s.step_s).margin(1e-9));
      CHECK(s.batch_size == 8);
      waited += s.wait_s;
    }
  }
  // Sync: a worker that pushed before the others waits at the servers for
  // the step to complete, and that wait is reported.
  if (setup.sync) CHECK(waited > 0.0);
  // The chief evaluated periodically and at the end, then shut the shards
  // down after everyone left.
  const ClusterWorkerResult& chief = *run.workers[0].result;
  REQUIRE(!chief.evals.empty());
  CHECK(chief.evals.back().final);
  CHECK(chief.evals.back().examples == 100);
  CHECK(chief.server_status.size() == static_cast<size_t>(setup.shards));
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.shutting_down);
    CHECK(s.live_workers.empty());
  }
}

TEST_CASE("sync, N = M: every worker stops at the last step, shards agree") {
  ClusterSetup setup = Setup();
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
    CHECK(s.counters.applied == setup.max_steps);
    CHECK(s.counters.aggregated == setup.max_steps * (setup.workers - 1));
    CHECK(s.counters.dropped_surplus == 0);
    CHECK(s.counters.dropped_stale == 0);
  }
  for (const WorkerRun& w : run.workers) {
    // Lockstep: one gradient per step from every worker, none dropped.
    CHECK(w.result->local_steps == setup.max_steps);
    CHECK(w.result->final_global_step == setup.max_steps);
    for (size_t i = 0; i < w.steps.size(); ++i) {
      CHECK(w.steps[i].global_step == static_cast<int64_t>(i));
    }
  }
  // Training makes progress on the learnable synthetic set.
  const std::vector<StepRecord>& chief = run.workers[0].steps;
  CHECK(MeanLoss(chief, chief.size() - 4, chief.size()) <
        MeanLoss(chief, 0, 4));
}

TEST_CASE("sync with a backup worker: surplus gradients are dropped") {
  ClusterSetup setup = Setup();
  setup.replicas_to_aggregate = 2;
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  int64_t pushes = 0, surplus = 0, dropped_somewhere = 0, taken = 0;
  for (const WorkerRun& w : run.workers) {
    pushes += w.result->local_steps;
    for (const auto& [outcome, n] : w.result->outcomes) {
      switch (outcome) {
        case StepOutcome::kDroppedSurplus:
          surplus += n;
          dropped_somewhere += n;
          break;
        case StepOutcome::kDroppedStale:
          dropped_somewhere += n;
          break;
        case StepOutcome::kApplied:
        case StepOutcome::kAggregated:
          taken += n;
          break;
        default:
          FAIL("unexpected outcome " << StepOutcomeName(outcome));
      }
    }
  }
  // Three workers, two gradients a step: the third one's is dropped, as
  // surplus when it comes while the next step is open, as stale when the
  // others are two steps on by then (a loaded machine can starve one
  // worker for a whole run: which of the two is timing, not a rule; the
  // shard's tests check the rule exactly).
  INFO("surplus " << surplus << " of " << dropped_somewhere << " dropped");
  CHECK(dropped_somewhere > 0);
  CHECK(taken + dropped_somewhere == pushes);
  int64_t dropped_on_shards = 0;
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
    // Every step took exactly N = 2 gradients.
    CHECK(s.counters.applied == setup.max_steps);
    CHECK(s.counters.aggregated == setup.max_steps);
    // What each shard got: the applied and aggregated ones, the rest
    // dropped; nothing refused.
    const int64_t dropped =
        s.counters.dropped_surplus + s.counters.dropped_stale;
    CHECK(s.counters.applied + s.counters.aggregated + dropped == pushes);
    CHECK(s.counters.refused == 0);
    // A push the workers saw dropped was dropped by at least one shard; a
    // push a shard dropped shows in the worker's outcome.
    CHECK(dropped_somewhere >= dropped);
    dropped_on_shards += dropped;
  }
  CHECK(dropped_somewhere <= dropped_on_shards);
}

TEST_CASE("async: every push applies and staleness is recorded") {
  ClusterSetup setup = Setup();
  setup.sync = false;
  setup.max_steps = 20;
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  int64_t pushes = 0, worker_staleness = 0;
  for (const WorkerRun& w : run.workers) {
    pushes += w.result->local_steps;
    for (const StepRecord& s : w.steps) {
      CHECK(s.outcome == StepOutcome::kApplied);
      worker_staleness += s.staleness;
    }
  }
  // A worker records the largest staleness over the shards for each push:
  // its sum lies between the largest shard's sum and the sum over shards.
  int64_t largest = 0, all = 0;
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.counters.applied == pushes);
    CHECK(s.step == pushes);
    CHECK(s.step >= setup.max_steps);
    int64_t histogram = 0, total = 0;
    for (const auto& [staleness, n] : s.staleness_histogram) {
      histogram += n;
      total += staleness * n;
    }
    CHECK(histogram == pushes);
    largest = std::max(largest, total);
    all += total;
  }
  CHECK(worker_staleness >= largest);
  CHECK(worker_staleness <= all);
}

TEST_CASE("sync: a worker whose data ends leaves, and the others go on") {
  ClusterSetup setup = Setup();
  setup.max_steps = 40;
  setup.short_lived_worker = 2;  // 200 images / batch 8: 25 steps
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  const ClusterWorkerResult& gone = *run.workers[2].result;
  CHECK(gone.end_reason == "the data ended (epochs done)");
  CHECK(gone.local_steps == 25);
  for (int w : {0, 1}) {
    CHECK(run.workers[w].result->final_global_step == setup.max_steps);
  }
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
  }
}

}  // namespace
}  // namespace psgd

namespace psgd {
namespace {

// Batch norm's running statistics (docs/CLUSTER.md, "Batch norm") with a
// ResNet; the shard tests check the fold's arithmetic.
TEST_CASE("batch norm statistics on the servers: pushed, folded, pulled") {
  ClusterSetup setup = Setup();
  setup.model = "resnet20";
  setup.workers = 2;
  setup.replicas_to_aggregate = 2;
  setup.max_steps = 4;
  setup.eval_every = 2;
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  auto state = ModelState("resnet20");
  REQUIRE(state.ok());
  REQUIRE(state->size() == 42);  // 21 batch norms (2 on shortcuts)
  for (const VariableSpec& s : *state) {
    INFO(s.name);
    REQUIRE(run.final_weights.count(s.name) == 1);
    const std::vector<float>& v = run.final_weights.at(s.name);
    REQUIRE(v.size() == static_cast<size_t>(NumElements(s.shape)));
    // Four folds of 0.1 moved the channels off their start (0 and 1); a
    // variance near 1 may round back to 1.0f now and then.
    const float start = absl::EndsWith(s.name, "running_var") ? 1.0f : 0.0f;
    CHECK(std::all_of(v.begin(), v.end(),
                      [](float x) { return std::isfinite(x); }));
    const auto moved =
        std::count_if(v.begin(), v.end(), [&](float x) { return x != start; });
    CHECK(moved >= static_cast<int64_t>(v.size()) - 2);
  }
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
  }
}

TEST_CASE(
    "batch norm statistics LOCAL: none on the servers; each worker "
    "keeps its own, saved for a restart") {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                             : "/tmp") +
      "/local_statistics";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ClusterSetup setup = Setup();
  setup.model = "resnet20";
  setup.workers = 2;
  setup.replicas_to_aggregate = 2;
  setup.max_steps = 3;
  setup.eval_every = 2;
  setup.local_statistics = true;
  setup.adjust = [&, inner = setup.adjust](int w, ClusterWorkerOptions* o) {
    inner(w, o);
    o->local_statistics_file = dir + "/worker-" + std::to_string(w);
  };
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  auto state = ModelState("resnet20");
  REQUIRE(state.ok());
  for (const VariableSpec& s : *state) {
    CHECK(run.final_weights.count(s.name) == 0);
  }
  auto vars = ModelVariables("resnet20");
  REQUIRE(vars.ok());
  int64_t on_servers = 0;
  for (const ps::ShardStatus& s : run.final_status) {
    on_servers += s.num_parameters;
  }
  CHECK(on_servers == TotalParameters(*vars));
  // Each worker's statistics, saved at its end: moved by its own batches,
  // so the two workers' differ.
  std::vector<NamedTensors> saved;
  for (int w = 0; w < 2; ++w) {
    auto loaded =
        LoadLocalStatistics(dir + "/worker-" + std::to_string(w), *state);
    INFO(loaded.status().ToString());
    REQUIRE(loaded.ok());
    REQUIRE(loaded->has_value());
    saved.push_back(std::move(**loaded));
  }
  const std::string first = (*state)[0].name;
  const Tensor& a = saved[0].at(first);
  const Tensor& b = saved[1].at(first);
  CHECK_FALSE(std::equal(a.data(), a.data() + a.size(), b.data()));
  CHECK(std::any_of(a.data(), a.data() + a.size(),
                    [](float x) { return x != 0.0f; }));
}

}  // namespace
}  // namespace psgd
