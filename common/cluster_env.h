// The cluster as an existing engine describes it: which task this process
// is and where every task runs, taken from Slurm's SLURM_* variables or from
// Kubeflow's TF_CONFIG, laid over a cluster config (which still says how to
// train and how many ps and worker tasks there are). Plain functions over
// an environment given as a map, so that the binaries read the process's
// environment at their edge only (docs/MULTIHOST.md):
//
//   worker --config=F --cluster_from=slurm       (srun; SLURM_PROCID, ...)
//   worker --config=F --cluster_from=tf_config   (a TFJob's TF_CONFIG)
//
// Slurm follows TensorFlow's SlurmClusterResolver: the step's node list
// (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST) expanded, each node
// repeated by its count of SLURM_STEP_TASKS_PER_NODE (else
// SLURM_TASKS_PER_NODE), ranks in that order; ranks 0..P-1 are ps:0..ps:P-1
// and the rest worker:0..; the k-th task on a node gets port port_base + k.
// SLURM_PROCID is this process's rank; SLURM_STEP_NUM_TASKS (else
// SLURM_NTASKS) must equal the config's task count.
//
// TF_CONFIG is {"cluster": {"chief": [...], "worker": [...], "ps": [...]},
// "task": {"type": T, "index": I}}; the chief is worker:0 and worker i is
// worker:i+1 (without a chief, worker i is worker:i); ps i is ps:i. The
// cluster lists the config's workers; a worker task beyond them is an
// elastic worker, accepted while its id is below the config's max_workers
// (its own address is not needed: workers do not listen), refused naming
// max_workers otherwise.
//
// Every error is INVALID_ARGUMENT and names the variable (and the task).
//
// Thread-safety: pure functions.
#ifndef PSGD_COMMON_CLUSTER_ENV_H_
#define PSGD_COMMON_CLUSTER_ENV_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster_config.h"

namespace psgd {

using Environment = std::map<std::string, std::string>;

// The environment of this process (environ), for the binaries.
Environment ProcessEnvironment();

// Slurm's compressed host lists: "n1", "n[1,3]", "n[1-3]",
// "n[1-2],m5,o[3-4,6]", zero-padded ranges "n[0001-0003]".
absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(
    absl::string_view nodelist);

// Slurm's tasks per node: "2", "2,1,3", "3(x2),2,1" -> 2 / 2,1,3 / 3,3,2,1.
absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(
    absl::string_view spec);

// The config with every task's address from the engine, and this task.
struct ResolvedCluster {
  ClusterConfig config;
  TaskId task;
  std::string source;  // "slurm", "tf_config"
};

// From SLURM_* (above). ps tasks listen on 0.0.0.0:<their port>.
absl::StatusOr<ResolvedCluster> ClusterFromSlurm(const ClusterConfig& config,
                                                 const Environment& env,
                                                 int port_base);

// From TF_CONFIG (above). ps tasks listen on 0.0.0.0:<their port>.
absl::StatusOr<ResolvedCluster> ClusterFromTfConfig(const ClusterConfig& config,
                                                    const Environment& env);

// `source` is "slurm" or "tf_config" (INVALID_ARGUMENT otherwise); the
// resolved cluster is validated as a config file would be.
absl::StatusOr<ResolvedCluster> ResolveCluster(const ClusterConfig& config,
                                               absl::string_view source,
                                               const Environment& env,
                                               int slurm_port_base);

// This process's task and cluster: from `task_flag` ("ps:I" / "worker:J")
// over the config as it is when `source` is empty (source "config"), else
// from the engine (ResolveCluster); a `task_flag` given beside a source
// must then name the same task. INVALID_ARGUMENT otherwise.
absl::StatusOr<ResolvedCluster> ResolveTask(const ClusterConfig& config,
                                            absl::string_view task_flag,
                                            absl::string_view source,
                                            const Environment& env,
                                            int slurm_port_base);

// The resolved cluster as a config file (text format) with a first comment
// line naming this task and the source: what --print_cluster shows.
std::string PrintResolvedCluster(const ResolvedCluster& cluster);

// A config in text format, its token left out when it came from a
// token_file (as PrintResolvedCluster): what the chief writes into the run
// directory (cluster.pbtxt) for a task started later with the addresses
// the cluster resolved, such as an elastic worker in a second srun step.
std::string ClusterConfigText(const ClusterConfig& config);

}  // namespace psgd

#endif  // PSGD_COMMON_CLUSTER_ENV_H_
