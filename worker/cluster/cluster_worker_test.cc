// The worker loop over in-process parameter-server shards: several workers
// (threads) train the tutorial model on a small synthetic set, sync and
// async, with backup workers and with a worker whose data ends early, each
// without and with overlap. No sockets, so it runs under ThreadSanitizer.
#include "worker/cluster/cluster_worker.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "worker/cluster/cluster_test_util.h"

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
  for (int w = 0; w < setup.workers; ++w) {
    const WorkerRun& r = run.workers[w];
    INFO("worker " << w << ": " << r.result.status().ToString());
    REQUIRE(r.result.ok());
    CHECK(r.result->local_steps == static_cast<int64_t>(r.steps.size()));
    for (const StepRecord& s : r.steps) {
      CHECK(s.step_s >= s.compute_s);
      CHECK(s.wait_s >= 0.0);
      CHECK(s.pull_s >= 0.0);
      CHECK(s.batch_size == 8);
    }
  }
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
        case StepOutcome::kDropped:
        case StepOutcome::kPartlyDropped:
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
  // Three workers, two gradients a step: the third one's is surplus (it
  // arrives once its step is full).
  CHECK(surplus > 0);
  CHECK(taken + dropped_somewhere == pushes);
  int64_t dropped_on_shards = 0;
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
    // Every step took exactly N = 2 gradients.
    CHECK(s.counters.applied == setup.max_steps);
    CHECK(s.counters.aggregated == setup.max_steps);
    // What each shard got: the applied and aggregated ones, the rest
    // dropped; nothing refused.
    const int64_t dropped = s.counters.dropped_surplus + s.counters.dropped_stale;
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

TEST_CASE("sync push: only the shards at the lowest step get the gradient") {
  ps::ModelVersion aligned{{7, 7, 7}, 2};
  CHECK(PushVersion(aligned).steps == std::vector<int64_t>{7, 7, 7});
  CHECK(PushVersion(aligned).generation == 2);
  // Shard 1 lags (a worker was killed between its pushes and started
  // again): pushing (8, 7, 8) would keep it a step behind for good.
  ps::ModelVersion mixed{{8, 7, 8}, 2};
  CHECK(PushVersion(mixed).steps ==
        std::vector<int64_t>{ps::kNoPush, 7, ps::kNoPush});
  CHECK(PushVersion(mixed).generation == 2);
}

}  // namespace
}  // namespace psgd
