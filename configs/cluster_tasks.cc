// Prints the tasks of a cluster config, one per line ("ps:0", ..., "worker:0",
// ...), after validating it; with --addresses also each task's address. Used
// by scripts/run/launch.sh. Exit status 1 with the validation error on stderr.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/cluster_config.h"

ABSL_FLAG(std::string, config, "", "Cluster config file (text format).");
ABSL_FLAG(bool, addresses, false, "Print 'TASK ADDRESS' per line.");
ABSL_FLAG(std::string, field, "",
          "Print one value instead of the tasks: name, run_root, mode.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "cluster_tasks --config=F [--addresses | --field=name|run_root|mode]");
  absl::ParseCommandLine(argc, argv);
  const std::string path = absl::GetFlag(FLAGS_config);
  if (path.empty()) {
    std::cerr << "cluster_tasks: --config is required\n";
    return 2;
  }
  absl::StatusOr<psgd::ClusterConfig> config = psgd::LoadClusterConfig(path);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 1;
  }
  const std::string field = absl::GetFlag(FLAGS_field);
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
    } else {
      std::cerr << "cluster_tasks: unknown --field '" << field
                << "' (expected name, run_root or mode)\n";
      return 2;
    }
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
