#include "worker/cluster/worker_task.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_config.h"
#include "common/host_address.h"
#include "common/prometheus.h"
#include "common/status_macros.h"
#include "ps/client/remote_client.h"
#include "spdlog/spdlog.h"
#include "worker/backend_factory/factory.h"
#include "worker/cluster/cluster_worker.h"
#include "worker/cluster/worker_config.h"
#include "worker/data/batcher.h"
#include "worker/data/dataset.h"
#include "worker/models/emulated_model.h"
#include "worker/models/registry.h"
#include "worker/paths.h"
#include "worker/session/stragglers.h"
#include "worker/session/task_files.h"
#include "worker/session/task_outputs.h"
#include "worker/session/worker_metrics.h"

namespace psgd {
namespace {

// Prometheus (worker.metrics_port), first: a port in use stops the task
// before it connects or trains. Null when the config asks for none.
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartPrometheus(
    const ClusterConfig& config, const TaskId& task, WorkerMetrics* metrics) {
  const config::WorkerTask& wt = WorkerTaskOf(config, task.index);
  if (wt.metrics_port() <= 0) return nullptr;
  std::string host;
  int port = 0;
  RETURN_IF_ERROR(SplitHostPort(wt.address(), &host, &port));
  // The host of the worker's address (loopback for a config on one
  // machine), and the cluster's token, as the servers' pages.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
      MetricsHttpServer::Start(
          host, wt.metrics_port(), [metrics] { return metrics->Text(); },
          SecurityFromConfig(config).token);
  if (!started.ok()) {
    return Annotate(started.status(), task.ToString() + ": ");
  }
  spdlog::info("Prometheus metrics on http://{}:{}/metrics", host,
               (*started)->port());
  return started;
}

// The task, with `w` resolved; the client it makes goes into *client (for
// RunWorkerTask's report of a failure).
absl::Status RunTask(const WorkerTaskOptions& options, const TaskId& task_id,
                     const ClusterConfig& config, WorkerTaskConfig& w,
                     std::unique_ptr<ps::RemotePsClient>* client_out) {
  const std::string task = task_id.ToString();
  WorkerMetrics prometheus_metrics(task_id.index);
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> prometheus,
                   StartPrometheus(config, task_id, &prometheus_metrics));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(w.backend, w.backend_options));
  std::unique_ptr<Model> model;
  std::optional<ComputeTimes> compute_times;
  if (config.has_emulation()) {
    // Emulated compute (docs/STRAGGLERS.md): the model's variables, no
    // network; a dataset of one batch, which the model never reads.
    ASSIGN_OR_RETURN(
        compute_times,
        ComputeTimes::Create(config.emulation(), config.training().seed(),
                             task_id.index));
    ASSIGN_OR_RETURN(model, EmulatedModel::Create(w.model, [&compute_times] {
                       return compute_times->Next();
                     }));
    w.data.name = "synthetic";
    // The servers hand out indices into the whole training set (data {
    // sharding: SERVERS }): the set has that size, read by no model.
    w.data.synthetic_train = w.loop.data_from_servers
                                 ? TrainingSamples(config)
                                 : w.batches.batch_size * w.batches.num_workers;
    w.data.synthetic_test = 1;
    w.batches.augment = false;
    spdlog::info("{}: EMULATED compute ({}), no model is computed", task,
                 compute_times->description());
  } else {
    ASSIGN_OR_RETURN(model, CreateModel(w.model, backend.get()));
  }
  ASSIGN_OR_RETURN(Dataset data, OpenDataset(w.data));
  // The model's preprocessing: the tutorial's 24x24 crops or the layer-graph
  // networks' 32x32 recipe.
  w.batches.pipeline = BatcherOptions::PipelineFor(model->image_shape());
  ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batches,
                   Batcher::Create(&data.train, w.batches));
  spdlog::info(
      "{} of cluster '{}': model {} on {}, data {} ({} of {} training "
      "images), batch {}, {} mode",
      task, config.name(), w.model, backend->name(), data.name,
      batches->examples_per_epoch(), data.train.count(), w.batches.batch_size,
      w.loop.sync ? "sync" : "async");
  // A ps host name that does not resolve is a typo, not a server to wait
  // for: named with its task.
  RETURN_IF_ERROR(CheckPsAddressesResolve(config));
  std::unique_ptr<ps::RemotePsClient>& client = *client_out;
  ASSIGN_OR_RETURN(
      const std::string run_dir,
      OpenRunDir(options.run_dir, options.config_path, config, w.loop.chief,
                 w.loop.start_timeout, &w.client, &client));
  TaskOutputsOptions outputs_options;
  outputs_options.run_dir = run_dir;
  outputs_options.task = task_id;
  outputs_options.chief = w.loop.chief;
  outputs_options.record_samples = config.data().record_samples();
  outputs_options.train_examples = data.train.count();
  ASSIGN_OR_RETURN(std::unique_ptr<TaskOutputs> outputs,
                   TaskOutputs::Open(std::move(outputs_options), client.get(),
                                     &prometheus_metrics));
  w.loop.job_end_marker = outputs->job_end_marker();
  // A restarted worker goes on with its batch norm statistics (LOCAL).
  w.loop.local_statistics_file = outputs->local_statistics_file();
  w.loop.samples_file = outputs->samples_file();
  ClusterWorkerCallbacks callbacks;
  callbacks.on_step = [&](const StepRecord& r) {
    return outputs->WriteStep(r);
  };
  callbacks.on_eval = [&](const EvalRecord& e) {
    return outputs->WriteEval(e);
  };
  // An emulated model is never evaluated.
  ClusterWorker worker(client.get(), model.get(), batches.get(),
                       w.loop.chief && !w.loop.emulated ? &data.test : nullptr,
                       w.loop, callbacks);
  ASSIGN_OR_RETURN(ClusterWorkerResult result, worker.Run());
  RETURN_IF_ERROR(outputs->WriteSummaries(config, result));
  spdlog::info("{} done: {} steps, final step {}, {:.0f} images/s ({})", task,
               result.local_steps, result.final_global_step,
               result.images_per_s, result.end_reason);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunWorkerTask(const WorkerTaskOptions& options,
                           const TaskId& task_id, const ClusterConfig& config) {
  ASSIGN_OR_RETURN(WorkerTaskConfig w,
                   WorkerTaskFromConfig(config, task_id.index));
  w.data.data_dir = ResolveUserPath(w.data.data_dir);
  std::unique_ptr<ps::RemotePsClient> client;
  absl::Status status = RunTask(options, task_id, config, w, &client);
  // The chief ends the job itself (Chief::CheckWorkers); another worker
  // tells the servers why it stops, so that the chief does at once.
  if (!w.loop.chief) {
    ReportWorkerFailure(client.get(), w.client, task_id.ToString(), status);
  }
  return status;
}

}  // namespace psgd
