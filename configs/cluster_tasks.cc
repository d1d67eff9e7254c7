// Prints the tasks of a cluster config, one per line ("ps:0", ..., "worker:0",
// ...), after validating it; with --addresses also each task's address, with
// --field one value, with --program a worker task's program. The one reader of
// configs for the scripts (scripts/run/launch.sh, scripts/lib/configs.py and
// those that use them). Exit status 1 with the validation error on stderr.
//
// --novalidate (with --field=name only) parses the text format without the
// loader's checks, for a tool that checks a rule of its own on the name
// before the rest (scripts/deploy/k8s_manifests.py: a Kubernetes name).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/cluster_config.h"
#include "google/protobuf/text_format.h"

ABSL_FLAG(std::string, config, "", "Cluster config file (text format).");
ABSL_FLAG(bool, addresses, false, "Print 'TASK ADDRESS' per line.");
ABSL_FLAG(std::string, field, "",
          "Print one value instead of the tasks: name, run_root, mode, "
          "checkpoints (none, shared: one directory for every ps, or "
          "per_task: each ps its own checkpoint_dir), or max_workers (the "
          "worker ids below it may run: max_workers, else the listed "
          "workers' count).");
ABSL_FLAG(std::string, program, "",
          "Print the worker program of this task (worker:J): its "
          "WorkerTask.program, an empty line for the C++ worker.");
ABSL_FLAG(bool, validate, true,
          "Validate the config; --novalidate only parses it (with "
          "--field=name only).");

namespace {

// The config's name as the text format has it, without validation; 1 when
// the file cannot be read or parsed.
int PrintUnvalidatedName(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "cannot read cluster config '" << path << "'\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  psgd::ClusterConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(text.str(), &config)) {
    std::cerr << path << ": cannot parse (the text format's error above)\n";
    return 1;
  }
  std::cout << config.name() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "cluster_tasks --config=F [--addresses | "
      "--field=name|run_root|mode|checkpoints|max_workers | "
      "--program=worker:J] "
      "[--novalidate]");
  absl::ParseCommandLine(argc, argv);
  const std::string path = absl::GetFlag(FLAGS_config);
  if (path.empty()) {
    std::cerr << "cluster_tasks: --config is required\n";
    return 2;
  }
  const std::string field = absl::GetFlag(FLAGS_field);
  if (!absl::GetFlag(FLAGS_validate)) {
    if (field != "name") {
      std::cerr << "cluster_tasks: --novalidate goes with --field=name only\n";
      return 2;
    }
    return PrintUnvalidatedName(path);
  }
  absl::StatusOr<psgd::ClusterConfig> config = psgd::LoadClusterConfig(path);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 1;
  }
  if (!field.empty()) {
    if (field == "name") {
      std::cout << config->name() << "\n";
    } else if (field == "run_root") {
      std::cout << config->run_root() << "\n";
    } else if (field == "mode") {
      std::cout << (config->training().mode() ==
                            psgd::config::TrainingConfig::SYNC
                        ? "sync"
                        : "async")
                << "\n";
    } else if (field == "checkpoints") {
      std::cout << (!config->has_checkpoint()           ? "none"
                    : psgd::PerHostCheckpoints(*config) ? "per_task"
                                                        : "shared")
                << "\n";
    } else if (field == "max_workers") {
      std::cout << psgd::MaxWorkers(*config) << "\n";
    } else {
      std::cerr << "cluster_tasks: unknown --field '" << field
                << "' (expected name, run_root, mode, checkpoints or "
                   "max_workers)\n";
      return 2;
    }
    return 0;
  }
  if (const std::string task = absl::GetFlag(FLAGS_program); !task.empty()) {
    absl::StatusOr<psgd::TaskId> id = psgd::ParseTaskId(task, *config);
    if (!id.ok() || id->kind != psgd::TaskId::Kind::kWorker) {
      std::cerr << "cluster_tasks: --program: '" << task
                << "' is not a worker task of the config\n";
      return 2;
    }
    std::cout << psgd::WorkerTaskOf(*config, id->index).program() << "\n";
    return 0;
  }
  const bool addresses = absl::GetFlag(FLAGS_addresses);
  for (int i = 0; i < config->ps_size(); ++i) {
    std::cout << "ps:" << i;
    if (addresses) std::cout << " " << config->ps(i).address();
    std::cout << "\n";
  }
  for (int i = 0; i < config->worker_size(); ++i) {
    std::cout << "worker:" << i;
    if (addresses) std::cout << " " << config->worker(i).address();
    std::cout << "\n";
  }
  return 0;
}
