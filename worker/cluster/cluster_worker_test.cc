// The worker loop over in-process parameter-server shards: several workers
// (threads) train the tutorial model on a small synthetic set, sync and
// async, with backup workers and with a worker whose data ends early. No
// sockets, so it runs under ThreadSanitizer.
#include "worker/cluster/cluster_worker.h"

#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "ps/in_process_client.h"
#include "ps/placement.h"
#include "ps/shard.h"
#include "worker/backend/factory.h"
#include "worker/data/dataset.h"
#include "worker/models/registry.h"

namespace psgd {
namespace {

constexpr char kModel[] = "cifar10_tutorial";
constexpr char kCluster[] = "test";

struct ClusterSetup {
  bool sync = true;
  int shards = 2;
  int workers = 3;
  int replicas_to_aggregate = 3;
  int64_t max_steps = 12;
  // Worker index whose data ends after one epoch (-1: none).
  int short_lived_worker = -1;
};

struct WorkerRun {
  absl::StatusOr<ClusterWorkerResult> result =
      absl::UnknownError("did not run");
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
};

struct ClusterRun {
  std::vector<WorkerRun> workers;
  std::vector<ps::ShardStatus> final_status;
};

ClusterRun RunCluster(const ClusterSetup& setup) {
  absl::StatusOr<std::vector<VariableSpec>> variables = ModelVariables(kModel);
  REQUIRE(variables.ok());
  std::vector<std::unique_ptr<ps::ParameterShard>> shards;
  std::vector<ps::ParameterShard*> shard_ptrs;
  for (int i = 0; i < setup.shards; ++i) {
    ps::ServerOptions o;
    o.shard_index = i;
    o.num_shards = setup.shards;
    o.cluster_name = kCluster;
    o.mode = setup.sync ? ps::Mode::kSync : ps::Mode::kAsync;
    o.replicas_to_aggregate = setup.sync ? setup.replicas_to_aggregate : 1;
    o.total_num_replicas = setup.workers;
    auto shard = ps::ParameterShard::Create(o);
    REQUIRE(shard.ok());
    shard_ptrs.push_back(shard->get());
    shards.push_back(*std::move(shard));
  }
  absl::StatusOr<ps::Placement> placement = ps::PlaceVariables(
      *variables, setup.shards, ps::ServerOptions().split_threshold_bytes);
  REQUIRE(placement.ok());

  DataOptions data_options;
  data_options.name = "synthetic";
  data_options.synthetic_train = 600;
  data_options.synthetic_test = 100;
  absl::StatusOr<Dataset> data = OpenDataset(data_options);
  REQUIRE(data.ok());

  ClusterRun run;
  run.workers.resize(setup.workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < setup.workers; ++w) {
    threads.emplace_back([&, w] {
      WorkerRun& out = run.workers[w];
      // Everything a worker owns lives on its thread; failures are
      // reported through `out.result` (Catch2 is not thread-safe).
      auto client = ps::InProcessPsClient::Create(shard_ptrs, *placement,
                                                  kCluster, w);
      BackendOptions bo;
      bo.threads = 1;
      auto backend = CreateBackend("cpu", bo);
      if (!client.ok() || !backend.ok()) {
        out.result = !client.ok() ? client.status() : backend.status();
        return;
      }
      auto model = CreateModel(kModel, backend->get());
      BatcherOptions batches;
      batches.batch_size = 8;
      batches.epochs = w == setup.short_lived_worker ? 1 : 0;
      batches.seed = 7;
      batches.worker_index = w;
      batches.num_workers = setup.workers;
      auto batcher = Batcher::Create(&data->train, batches);
      if (!model.ok() || !batcher.ok()) {
        out.result = !model.ok() ? model.status() : batcher.status();
        return;
      }
      ClusterWorkerOptions o;
      o.worker_id = w;
      o.chief = w == 0;
      o.sync = setup.sync;
      o.max_steps = setup.max_steps;
      o.eval_every = 5;
      o.eval_batch = 50;
      o.log_every = 0;
      o.start_timeout = absl::Seconds(120);
      o.step_timeout = absl::Seconds(120);
      o.finish_timeout = absl::Seconds(120);
      ClusterWorkerCallbacks callbacks;
      callbacks.on_step = [&out](const StepRecord& r) {
        out.steps.push_back(r);
        return absl::OkStatus();
      };
      callbacks.on_eval = [&out](const EvalRecord& e) {
        out.evals.push_back(e);
        return absl::OkStatus();
      };
      ClusterWorker worker(client->get(), model->get(), batcher->get(),
                           w == 0 ? &data->test : nullptr, o, callbacks);
      out.result = worker.Run();
    });
  }
  for (std::thread& t : threads) t.join();
  for (auto& s : shards) run.final_status.push_back(s->Status());
  return run;
}

double MeanLoss(const std::vector<StepRecord>& steps, size_t from,
                size_t to) {
  double sum = 0.0;
  for (size_t i = from; i < to; ++i) sum += steps[i].loss;
  return sum / (to - from);
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
      CHECK(!s.outcome.empty());
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
  ClusterSetup setup;
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
  ClusterSetup setup;
  setup.replicas_to_aggregate = 2;
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  int64_t pushes = 0, surplus = 0;
  for (const WorkerRun& w : run.workers) {
    pushes += w.result->local_steps;
    for (const auto& [outcome, n] : w.result->outcomes) {
      if (outcome == "dropped_surplus") surplus += n;
    }
  }
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
    // Every step took exactly N = 2 gradients.
    CHECK(s.counters.applied == setup.max_steps);
    CHECK(s.counters.aggregated == setup.max_steps);
    // What each shard got: the applied and aggregated ones, the rest
    // dropped; nothing refused.
    CHECK(s.counters.applied + s.counters.aggregated +
              s.counters.dropped_surplus + s.counters.dropped_stale ==
          pushes);
    CHECK(s.counters.refused == 0);
  }
}

TEST_CASE("async: every push applies and staleness is recorded") {
  ClusterSetup setup;
  setup.sync = false;
  setup.max_steps = 20;
  ClusterRun run = RunCluster(setup);
  CheckCommon(setup, run);
  int64_t pushes = 0;
  for (const WorkerRun& w : run.workers) {
    pushes += w.result->local_steps;
    for (const StepRecord& s : w.steps) {
      CHECK(s.outcome == "applied");
      CHECK(s.staleness >= 0);
    }
  }
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.counters.applied == pushes);
    CHECK(s.step == pushes);
    CHECK(s.step >= setup.max_steps);
    int64_t histogram = 0;
    for (const auto& [staleness, n] : s.staleness_histogram) histogram += n;
    CHECK(histogram == pushes);
  }
}

TEST_CASE("sync: a worker whose data ends leaves, and the others go on") {
  ClusterSetup setup;
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
