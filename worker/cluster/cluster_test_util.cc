#include "worker/cluster/cluster_test_util.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "ps/state/placement.h"
#include "ps/testing/in_process_client.h"
#include "worker/backend_factory/factory.h"
#include "worker/data/dataset.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"

namespace psgd {
namespace testing {

constexpr char kCluster[] = "test";
constexpr int kBatchSize = 8;

ClusterRun RunCluster(const ClusterSetup& setup) {
  absl::StatusOr<std::vector<VariableSpec>> variables =
      ModelVariables(setup.model);
  REQUIRE(variables.ok());
  if (!setup.local_statistics) {
    absl::StatusOr<std::vector<VariableSpec>> state = ModelState(setup.model);
    REQUIRE(state.ok());
    variables->insert(variables->end(), state->begin(), state->end());
  }
  std::vector<std::unique_ptr<ps::ParameterShard>> shards;
  std::vector<ps::ParameterShard*> shard_ptrs;
  for (int i = 0; i < setup.shards; ++i) {
    ps::ShardOptions o;
    o.shard_index = i;
    o.num_shards = setup.shards;
    o.cluster_name = kCluster;
    o.mode = setup.sync ? ps::Mode::kSync : ps::Mode::kAsync;
    o.replicas_to_aggregate = setup.sync ? setup.replicas_to_aggregate : 1;
    o.total_num_replicas = setup.workers;
    o.worker_lease = setup.worker_lease;
    o.checkpoint.dir = setup.checkpoint_dir;
    o.checkpoint.every_steps = setup.checkpoint_every_steps;
    o.batch_norm_statistics = setup.local_statistics
                                  ? ps::BatchNormStatistics::kLocal
                                  : ps::BatchNormStatistics::kServer;
    auto shard = ps::ParameterShard::Create(o);
    INFO(shard.status().ToString());
    REQUIRE(shard.ok());
    shard_ptrs.push_back(shard->get());
    shards.push_back(*std::move(shard));
  }
  absl::StatusOr<ps::Placement> placement = ps::PlaceVariables(
      *variables, setup.shards, ps::ShardOptions().split_threshold_bytes);
  REQUIRE(placement.ok());

  DataOptions data_options;
  data_options.name = "synthetic";
  data_options.synthetic_train = 600;
  data_options.synthetic_test = 100;
  absl::StatusOr<Dataset> data = OpenDataset(data_options);
  REQUIRE(data.ok());

  // Each worker's backend and model, with the plan for its batch size made
  // here, one after the other: oneDNN keeps the primitives it makes in a
  // process-wide cache, and libdnnl is not built with tsan, which would see
  // the workers' threads race when they make convolutions at once. Each
  // model then moves to its worker's thread.
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Model>> models;
  for (int w = 0; w < setup.workers; ++w) {
    BackendOptions bo;
    bo.threads = 1;
    auto backend = CreateBackend("cpu", bo);
    REQUIRE(backend.ok());
    auto model = CreateModel(setup.model, backend->get());
    REQUIRE(model.ok());
    BatcherOptions one;
    one.batch_size = kBatchSize;
    one.pipeline = BatcherOptions::PipelineFor((*model)->image_shape());
    auto batcher = Batcher::Create(&data->train, one);
    REQUIRE(batcher.ok());
    auto batch = (*batcher)->Next();
    REQUIRE(batch.ok());
    NamedTensors weights = InitialValues((*model)->variables(), 1);
    NamedTensors gradients;
    REQUIRE((*model)
                ->ComputeGradients(ViewsOf(weights), batch->images.view(),
                                   batch->labels, &gradients)
                .ok());
    backends.push_back(*std::move(backend));
    models.push_back(*std::move(model));
  }

  std::vector<std::unique_ptr<ps::PsClient>> inner;
  std::vector<ps::PsClient*> clients;
  for (int w = 0; w < setup.workers; ++w) {
    auto client =
        ps::InProcessPsClient::Create(shard_ptrs, *placement, kCluster, w);
    REQUIRE(client.ok());
    inner.push_back(*std::move(client));
    clients.push_back(setup.wrap ? setup.wrap(w, inner.back().get())
                                 : inner.back().get());
  }

  ClusterRun run;
  run.workers.resize(setup.workers);
  std::atomic<int> running{setup.workers};
  std::vector<std::thread> threads;
  for (int w = 0; w < setup.workers; ++w) {
    threads.emplace_back([&, w] {
      WorkerRun& out = run.workers[w];
      // Failures are reported through `out.result` (Catch2 is not
      // thread-safe).
      BatcherOptions batches;
      batches.batch_size = kBatchSize;
      batches.pipeline = BatcherOptions::PipelineFor(models[w]->image_shape());
      batches.epochs = w == setup.short_lived_worker ? 1 : 0;
      batches.seed = 7;
      batches.worker_index = w;
      batches.num_workers = setup.workers;
      auto batcher = Batcher::Create(&data->train, batches);
      if (!batcher.ok()) {
        out.result = batcher.status();
        --running;
        return;
      }
      ClusterWorkerOptions o;
      o.worker_id = w;
      o.chief = w == 0;
      o.sync = setup.sync;
      o.max_steps = setup.max_steps;
      o.eval_every = setup.eval_every;
      o.eval_batch = 50;
      o.log_every = 0;
      o.start_timeout = absl::Seconds(120);
      o.step_timeout = absl::Seconds(120);
      o.finish_timeout = absl::Seconds(120);
      o.final_checkpoint = !setup.checkpoint_dir.empty();
      o.statistics_on_servers = !setup.local_statistics;
      if (setup.adjust) setup.adjust(w, &o);
      ClusterWorkerCallbacks callbacks;
      callbacks.on_step = [&out](const StepRecord& r) {
        out.steps.push_back(r);
        return absl::OkStatus();
      };
      callbacks.on_eval = [&out](const EvalRecord& e) {
        out.evals.push_back(e);
        return absl::OkStatus();
      };
      ClusterWorker worker(clients[w], models[w].get(), batcher->get(),
                           w == 0 ? &data->test : nullptr, o, callbacks);
      out.result = worker.Run();
      --running;
    });
  }
  std::thread expirer;
  if (setup.worker_lease > absl::ZeroDuration()) {
    expirer = std::thread([&] {
      while (running > 0) {
        for (ps::ParameterShard* s : shard_ptrs) s->ExpireWorkers(absl::Now());
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  if (setup.during) setup.during(shard_ptrs);
  for (std::thread& t : threads) t.join();
  if (expirer.joinable()) expirer.join();
  // Shard 0's last decisions reach the others before their state is read.
  CHECK(shards[0]->AwaitDecisionsDelivered(absl::Now() + absl::Seconds(30)));
  for (auto& s : shards) {
    run.final_status.push_back(s->Status());
    ps::ParameterShard::Snapshot w = s->LatestWeights();
    for (int i = 0; w != nullptr && i < w->layout->size(); ++i) {
      auto v = w->weights[i].span();
      run.final_weights[w->layout->names[i]].assign(v.begin(), v.end());
    }
  }
  return run;
}

double MeanLoss(const std::vector<StepRecord>& steps, size_t from, size_t to) {
  double sum = 0.0;
  for (size_t i = from; i < to; ++i) sum += steps[i].loss;
  return sum / (to - from);
}

}  // namespace testing
}  // namespace psgd
