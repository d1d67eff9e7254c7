#include "common/cluster_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, task, "", "This task: ps:I or worker:J.");
ABSL_FLAG(std::string, cluster_from, "",
          "Take this task and every task's address from an engine: 'slurm' "
          "(SLURM_PROCID, SLURM_STEP_NODELIST, ... of srun) or 'tf_config' "
          "(Kubeflow's TF_CONFIG). Default: --task and the config's "
          "addresses.");
ABSL_FLAG(int, slurm_port_base, 8888,
          "With --cluster_from=slurm: the k-th task on a node listens on "
          "this port + k.");
ABSL_FLAG(bool, print_cluster, false,
          "Print the cluster this task resolved (a config file) and exit.");

namespace psgd {

absl::StatusOr<ResolvedCluster> ClusterFromFlags(const ClusterConfig& config) {
  const std::string source = absl::GetFlag(FLAGS_cluster_from);
  return ResolveTask(config, absl::GetFlag(FLAGS_task), source,
                     source.empty() ? Environment() : ProcessEnvironment(),
                     absl::GetFlag(FLAGS_slurm_port_base));
}

bool PrintClusterRequested() { return absl::GetFlag(FLAGS_print_cluster); }

}  // namespace psgd
