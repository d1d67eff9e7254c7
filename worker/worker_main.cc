// worker: one worker task of a cluster config.
//
//   worker --config=configs/sync_2ps_4workers.pbtxt --task=worker:1
//       [--run_dir=runs/NAME-TIMESTAMP] [--log_level=info]
//
// Parses its flags and runs the task (worker/cluster/worker_task.h): waits
// for the parameter servers, trains (worker:0, the chief, first puts the
// initial weights on the servers), and writes its metrics to the run
// directory: worker-J.jsonl (one "train" line per step, "eval" lines from
// the chief), worker-J.summary.json, and from the chief config.pbtxt and
// summary.json. The run directory is --run_dir, or else the one the chief
// chose (RUN_ROOT/NAME-TIMESTAMP), which the servers pass on to the others.
//
//   worker --list_models     prints every model with its parameter count,
//                            the memory a training step plans per image
//                            (CPU backend, 32 images; layer-graph
//                            networks), and ", batch norm" after a model
//                            with batch norm's running statistics (the
//                            scripts' --model and --bn checks read it)
//
// Exits 0 when training ended normally, 1 on an error (logged), 2 for bad
// flags or config.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cluster_config.h"
#include "common/cluster_env.h"
#include "common/cluster_flags.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/mutex_tuning.h"
#include "spdlog/spdlog.h"
#include "worker/backend_factory/factory.h"
#include "worker/cluster/worker_task.h"
#include "worker/models/registry.h"
#include "worker/paths.h"
#include "worker/session/leave_request.h"

ABSL_FLAG(std::string, config, "", "Cluster config file (text format).");
ABSL_FLAG(
    std::string, run_dir, "",
    "Run directory shared by every task (scripts/run/launch.sh passes one); "
    "default: the chief's RUN_ROOT/NAME-TIMESTAMP.");

ABSL_FLAG(bool, list_models, false,
          "Print the models the worker knows, with their parameter counts "
          "and whether they have batch norm, and exit.");

int main(int argc, char** argv) {
  psgd::SetProgramUsage(
      "worker --config=CLUSTER.pbtxt --task=worker:J [--run_dir=DIR]\n"
      "       worker --list_models");
  // SIGTERM: leave at the next step boundary (docs/PS.md, "Elastic
  // workers"), not die mid-step. First, so that every thread inherits
  // SIGTERM blocked (leave_request.h says why).
  psgd::InstallLeaveOnSigterm();
  // The pushes' and pulls' buffers reused from step to step
  // (common/malloc_tuning.h).
  const std::string malloc_tuning = psgd::TuneMallocForTensors();
  // absl's deadlock detection off (common/mutex_tuning.h).
  const std::string mutex_tuning = psgd::TuneMutexesForServing();
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_list_models)) {
    // The memory a training step plans per image, on a CPU backend of its
    // own for each model (the backend's workspace is its ops'), at 32
    // images a step; the models that plan nothing ahead say nothing. The plan
    // of Winograd wherever it applies (conv=winograd), not the default's
    // (conv=auto): that one times both kernels on every shape first, seconds
    // a model, and its choice varies with the machine and its load.
    constexpr int64_t kBatch = 32;
    for (const psgd::ModelInfo& m : psgd::ListModels()) {
      absl::StatusOr<std::vector<psgd::VariableSpec>> state =
          psgd::ModelState(m.name);
      std::string memory;
      absl::StatusOr<std::unique_ptr<psgd::Backend>> cpu =
          psgd::CreateBackend("cpu:conv=winograd", psgd::BackendOptions{});
      if (cpu.ok()) {
        absl::StatusOr<std::unique_ptr<psgd::Model>> model =
            psgd::CreateModel(m.name, cpu->get());
        absl::StatusOr<int64_t> bytes =
            model.ok() ? (*model)->StepBytes(kBatch) : model.status();
        if (bytes.ok()) {
          memory = absl::StrFormat(", %.2f MB a step per image",
                                   *bytes / 1e6 / kBatch);
        }
      }
      std::printf("%-18s %12s parameters%s%s\n", m.name.c_str(),
                  psgd::FormatCount(m.parameters).c_str(), memory.c_str(),
                  state.ok() && !state->empty() ? ", batch norm" : "");
    }
    return 0;
  }
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
  spdlog::info("{}", malloc_tuning);
  spdlog::info("{}", mutex_tuning);
  psgd::WorkerTaskOptions options;
  options.config_path = config_path;
  options.run_dir = absl::GetFlag(FLAGS_run_dir);
  absl::Status s = psgd::RunWorkerTask(options, *task, *config);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  return 0;
}
