// worker: one worker task of a cluster config.
//
//   worker --config=configs/sync_2ps_4workers.pbtxt --task=worker:1
//       [--run_dir=runs/NAME-TIMESTAMP] [--log_level=info]
//
// Waits for the parameter servers, trains (worker:0, the chief, first puts
// the initial weights on the servers), and writes its metrics to the run
// directory: worker-J.jsonl (one "train" line per step, "eval" lines from
// the chief), worker-J.summary.json, and from the chief config.pbtxt and
// summary.json. The run directory is --run_dir, or else the one the chief
// chose (RUN_ROOT/NAME-TIMESTAMP), which the servers pass on to the others.
//
// Exits 0 when training ended normally, 1 on an error (logged), 2 for bad
// flags or config.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_config.h"
#include "common/cluster_env.h"
#include "common/cluster_flags.h"
#include "common/file_io.h"
#include "common/event_file.h"
#include "common/flags_usage.h"
#include "common/prometheus.h"
#include "common/host_address.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "ps/client/grpc_client.h"
#include "spdlog/spdlog.h"
#include "worker/backends/factory.h"
#include "worker/cluster/cluster_worker.h"
#include "worker/cluster/resync.h"
#include "worker/cluster/server_wait.h"
#include "worker/cluster/worker_config.h"
#include "worker/cluster/worker_metrics.h"
#include "worker/data/batcher.h"
#include "worker/data/dataset.h"
#include "worker/models/registry.h"
#include "worker/paths.h"

ABSL_FLAG(std::string, config, "", "Cluster config file (text format).");
ABSL_FLAG(std::string, run_dir, "",
          "Run directory shared by every task (scripts/run/launch.sh passes one); "
          "default: the chief's RUN_ROOT/NAME-TIMESTAMP.");

namespace psgd {
namespace {

JsonObject StepJson(const std::string& task, const StepRecord& r) {
  return JsonObject()
      .Set("kind", "train")
      .Set("task", task)
      .Set("step", r.global_step)
      .Set("local_step", r.local_step)
      .Set("epoch", r.epoch)
      .Set("wall_time_s", r.wall_time_s)
      .Set("loss", r.loss)
      .Set("cross_entropy", r.cross_entropy)
      .Set("train_accuracy", r.train_accuracy)
      .Set("batch_size", r.batch_size)
      .Set("images_per_s", r.images_per_s)
      .Set("step_s", r.step_s)
      .Set("input_wait_s", r.input_s)
      .Set("compute_s", r.compute_s)
      .Set("push_s", r.push_s)
      .Set("pull_s", r.pull_s)
      .Set("wait_s", r.wait_s)
      .Set("staleness", r.staleness)
      .Set("outcome", StepOutcomeName(r.outcome));
}

JsonObject EvalJson(const std::string& task, const EvalRecord& e) {
  return JsonObject()
      .Set("kind", "eval")
      .Set("task", task)
      .Set("step", e.global_step)
      .Set("wall_time_s", e.wall_time_s)
      .Set("test_accuracy", e.test_accuracy)
      .Set("test_loss", e.test_loss)
      .Set("examples", e.examples)
      .Set("eval_s", e.eval_s)
      .Set("final", e.final);
}

JsonObject WorkerSummary(const std::string& task,
                         const ClusterWorkerResult& r) {
  JsonObject s;
  s.Set("task", task)
      .Set("local_steps", r.local_steps)
      .Set("final_global_step", r.final_global_step)
      .Set("seconds", r.seconds)
      .Set("images_per_s", r.images_per_s)
      .Set("end_reason", r.end_reason)
      .Set("unaligned_steps", r.unaligned_steps)
      .Set("recoveries", r.recoveries);
  for (const auto& [outcome, count] : r.outcomes) {
    s.Set(absl::StrCat("pushes_", StepOutcomeName(outcome)), count);
  }
  if (!r.evals.empty()) {
    s.Set("final_test_accuracy", r.evals.back().test_accuracy);
  }
  return s;
}

// The run's summary, written by the chief once the others have left.
JsonObject RunSummary(const ClusterConfig& config,
                      const ClusterWorkerResult& r) {
  const config::TrainingConfig& t = config.training();
  JsonObject s;
  s.Set("cluster", config.name())
      .Set("mode", t.mode() == config::TrainingConfig::SYNC ? "sync" : "async")
      .Set("ps_tasks", config.ps_size())
      .Set("workers", config.worker_size())
      .Set("replicas_to_aggregate", t.replicas_to_aggregate())
      .Set("total_num_replicas", t.total_num_replicas())
      .Set("batch_size", t.batch_size())
      .Set("model", config.model().name())
      .Set("final_global_step", r.final_global_step)
      .Set("seconds", r.seconds);
  if (!r.evals.empty()) {
    s.Set("final_test_accuracy", r.evals.back().test_accuracy);
  }
  // Server counters summed over the shards; staleness of shard 0.
  ps::PushCounters total;
  for (const ps::ShardStatus& st : r.server_status) {
    total.aggregated += st.counters.aggregated;
    total.applied += st.counters.applied;
    total.dropped_stale += st.counters.dropped_stale;
    total.dropped_surplus += st.counters.dropped_surplus;
    total.refused += st.counters.refused;
    total.refused_too_stale += st.counters.refused_too_stale;
    total.completed_by_leave += st.counters.completed_by_leave;
  }
  int64_t expired = 0;
  for (const ps::ShardStatus& st : r.server_status) {
    expired = std::max(expired, st.workers_expired);
  }
  s.Set("server_workers_expired", expired);
  // Parameter-server restarts survived and what they cost
  // (docs/RELIABILITY.md).
  const RollbackSummary rollbacks = SummarizeRollbacks(r.server_status);
  s.Set("ps_rollbacks", rollbacks.rollbacks)
      .Set("steps_redone", rollbacks.steps_redone)
      .Set("max_steps_redone", rollbacks.max_steps_redone);
  s.Set("server_aggregated", total.aggregated)
      .Set("server_applied", total.applied)
      .Set("server_dropped_stale", total.dropped_stale)
      .Set("server_dropped_surplus", total.dropped_surplus)
      .Set("server_refused", total.refused)
      .Set("server_refused_too_stale", total.refused_too_stale)
      .Set("server_completed_by_leave", total.completed_by_leave);
  if (!r.server_status.empty()) {
    std::string hist;
    for (const auto& [staleness, count] :
         r.server_status[0].staleness_histogram) {
      absl::StrAppend(&hist, hist.empty() ? "" : ",", staleness, ":", count);
    }
    s.Set("staleness_histogram_shard0", hist);
  }
  return s;
}

absl::Status RunWorker(const std::string& config_path, const TaskId& task_id,
                       const ClusterConfig& config) {
  const std::string task = task_id.ToString();
  ASSIGN_OR_RETURN(WorkerTaskConfig w,
                   WorkerTaskFromConfig(config, task_id.index));
  w.data.data_dir = ResolveUserPath(w.data.data_dir);
  // Prometheus (worker.metrics_port), first: a port in use stops the task
  // before it connects or trains.
  WorkerMetrics prometheus_metrics(task_id.index);
  std::unique_ptr<MetricsHttpServer> prometheus;
  if (const config::WorkerTask& wt = config.worker(task_id.index);
      wt.metrics_port() > 0) {
    std::string host;
    int port = 0;
    RETURN_IF_ERROR(SplitHostPort(wt.address(), &host, &port));
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
        MetricsHttpServer::Start("0.0.0.0", wt.metrics_port(),
                                 [&] { return prometheus_metrics.Text(); });
    if (!started.ok()) return Annotate(started.status(), task + ": ");
    prometheus = *std::move(started);
    spdlog::info("Prometheus metrics on http://{}:{}/metrics", host,
                 prometheus->port());
  }

  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(w.backend, w.backend_options));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   CreateModel(w.model, backend.get()));
  ASSIGN_OR_RETURN(Dataset data, OpenDataset(w.data));
  ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batches,
                   Batcher::Create(&data.train, w.batches));
  spdlog::info(
      "{} of cluster '{}': model {} on {}, data {} ({} of {} training "
      "images), batch {}, {} mode",
      task, config.name(), w.model, backend->name(), data.name,
      batches->examples_per_epoch(), data.train.count(),
      w.batches.batch_size, w.loop.sync ? "sync" : "async");

  // A ps host name that does not resolve is a typo, not a server to wait
  // for: named with its task.
  RETURN_IF_ERROR(CheckPsAddressesResolve(config));
  RETURN_IF_ERROR(WaitForServers(w.client.addresses, w.client.security,
                                 absl::Now() + w.loop.start_timeout));

  // The run directory: given, or the chief's choice, which it sends with
  // Initialize and the servers pass on to everyone else.
  std::string run_dir = ResolveUserPath(absl::GetFlag(FLAGS_run_dir));
  if (run_dir.empty() && w.loop.chief) {
    ASSIGN_OR_RETURN(run_dir,
                     CreateRunDir("", ResolveUserPath(config.run_root()),
                                  config.name(), absl::Now()));
  }
  w.client.run_dir = run_dir;
  ASSIGN_OR_RETURN(std::unique_ptr<ps::GrpcPsClient> client,
                   ps::GrpcPsClient::Create(w.client));
  if (run_dir.empty()) {
    ASSIGN_OR_RETURN(run_dir, AwaitRunDir(client.get(),
                                          absl::Now() + w.loop.start_timeout));
  }
  ASSIGN_OR_RETURN(run_dir, CreateRunDir(run_dir, "", "", absl::Now()));
  const std::string prefix =
      absl::StrCat(run_dir, "/worker-", task_id.index);
  // A restarted worker adds to the lines of the one before.
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsWriter> metrics,
                   MetricsWriter::Open(prefix + ".jsonl", /*append=*/true));
  if (w.loop.chief) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path));
    RETURN_IF_ERROR(WriteFileAtomically(run_dir + "/config.pbtxt", text));
    if (config.security().has_token() && !config.security().has_token_file()) {
      spdlog::warn(
          "the config holds the cluster's token inline, so {}/config.pbtxt "
          "holds it too; security.token_file keeps it out of run directories",
          run_dir);
    }
  }
  spdlog::info("run directory {}", run_dir);

  // The chief's TensorBoard scalars (tensorboard --logdir RUN_DIR).
  std::unique_ptr<EventFileWriter> events;
  if (w.loop.chief) {
    ASSIGN_OR_RETURN(events, EventFileWriter::Create(run_dir, absl::StrCat("worker-", task_id.index)));
  }
  std::map<StepOutcome, int64_t> outcomes;
  ClusterWorkerCallbacks callbacks;
  // The payload of each step's pushes and pulls (what crossed the network
  // for this worker), from the client's counters.
  ps::GrpcPsClient::PayloadBytes last_payload = client->payload_bytes();
  callbacks.on_step = [&](const StepRecord& r) {
    const ps::GrpcPsClient::PayloadBytes now = client->payload_bytes();
    JsonObject line = StepJson(task, r);
    line.Set("sent_bytes", now.sent - last_payload.sent)
        .Set("received_bytes", now.received - last_payload.received)
        // The whole training set's size: epochs of the cluster are the
        // images every worker took over it (scripts/run/compare.py).
        .Set("train_examples", data.train.count())
        // To line steps up with samples taken outside the process (a host's
        // link counters, scripts/run/netns_sampler.py).
        .Set("unix_time", absl::ToUnixMicros(absl::Now()) / 1e6);
    if (events != nullptr) {
      const double t = absl::ToUnixMicros(absl::Now()) / 1e6;
      const std::pair<std::string, double> scalars[] = {
          {"train/loss", r.loss},
          {"train/accuracy", r.train_accuracy},
          {"train/images_per_s", r.images_per_s},
          {"step/step_s", r.step_s},
          {"step/input_s", r.input_s},
          {"step/compute_s", r.compute_s},
          {"step/push_s", r.push_s},
          {"step/pull_s", r.pull_s},
          {"step/wait_s", r.wait_s},
          {"train/staleness", static_cast<double>(r.staleness)},
          {"bytes/sent", static_cast<double>(now.sent - last_payload.sent)},
          {"bytes/received",
           static_cast<double>(now.received - last_payload.received)},
      };
      for (const auto& [tag, value] : scalars) {
        RETURN_IF_ERROR(events->WriteScalar(tag, r.global_step, value, t));
      }
      ++outcomes[r.outcome];
      for (const auto& [outcome, n] : outcomes) {
        RETURN_IF_ERROR(events->WriteScalar(
            absl::StrCat("outcomes/", StepOutcomeName(outcome)), r.global_step,
            static_cast<double>(n), t));
      }
      RETURN_IF_ERROR(events->Flush());
    }
    prometheus_metrics.Record(r, now.sent - last_payload.sent,
                              now.received - last_payload.received);
    last_payload = now;
    return metrics->Write(line);
  };
  callbacks.on_eval = [&](const EvalRecord& e) {
    if (events != nullptr) {
      const double t = absl::ToUnixMicros(absl::Now()) / 1e6;
      RETURN_IF_ERROR(
          events->WriteScalar("test/accuracy", e.global_step, e.test_accuracy, t));
      RETURN_IF_ERROR(
          events->WriteScalar("test/loss", e.global_step, e.test_loss, t));
      RETURN_IF_ERROR(events->Flush());
    }
    return metrics->Write(EvalJson(task, e));
  };
  ClusterWorker worker(client.get(), model.get(), batches.get(),
                       w.loop.chief ? &data.test : nullptr, w.loop, callbacks);
  ASSIGN_OR_RETURN(ClusterWorkerResult result, worker.Run());
  RETURN_IF_ERROR(
      WriteJsonFile(prefix + ".summary.json", WorkerSummary(task, result)));
  if (w.loop.chief) {
    RETURN_IF_ERROR(WriteJsonFile(run_dir + "/summary.json",
                                  RunSummary(config, result)));
  }
  spdlog::info("{} done: {} steps, final step {}, {:.0f} images/s ({})", task,
               result.local_steps, result.final_global_step,
               result.images_per_s, result.end_reason);
  return absl::OkStatus();
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  psgd::SetProgramUsage(
      "worker --config=CLUSTER.pbtxt --task=worker:J [--run_dir=DIR]");
  absl::ParseCommandLine(argc, argv);
  const std::string config_path =
      psgd::ResolveUserPath(absl::GetFlag(FLAGS_config));
  if (config_path.empty() || (absl::GetFlag(FLAGS_task).empty() &&
                              absl::GetFlag(FLAGS_cluster_from).empty())) {
    std::fprintf(stderr,
                 "worker: --config and --task (or --cluster_from) are "
                 "required\n");
    return 2;
  }
  absl::StatusOr<psgd::ClusterConfig> loaded =
      psgd::LoadClusterConfig(config_path);
  absl::StatusOr<psgd::ResolvedCluster> cluster =
      loaded.ok() ? psgd::ClusterFromFlags(*loaded)
                  : absl::StatusOr<psgd::ResolvedCluster>(loaded.status());
  if (cluster.ok() && cluster->task.kind != psgd::TaskId::Kind::kWorker) {
    cluster = absl::InvalidArgumentError(absl::StrCat(
        "task '", cluster->task.ToString(), "' (from ", cluster->source,
        ") is a parameter server; run ps_server for it"));
  }
  if (!cluster.ok()) {
    std::fprintf(stderr, "worker: %s\n",
                 std::string(cluster.status().message()).c_str());
    return 2;
  }
  if (psgd::PrintClusterRequested()) {
    std::fputs(psgd::PrintResolvedCluster(*cluster).c_str(), stdout);
    return 0;
  }
  const psgd::ClusterConfig* config = &cluster->config;
  const psgd::TaskId* task = &cluster->task;
  if (absl::Status s = psgd::InitLoggingFromFlags(task->ToString()); !s.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  absl::Status s = psgd::RunWorker(config_path, *task, *config);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  return 0;
}
