// The flags by which ps_server and worker learn their task and cluster, and
// what they resolve to (common/cluster_env.h):
//
//   --task=ps:I | worker:J          the task, from the config's addresses
//   --cluster_from=slurm|tf_config  the task and addresses from the engine
//   --slurm_port_base=P             Slurm: the first task of a node on P
//   --print_cluster                 print the resolved cluster and exit
//
// Thread-safety: call after absl::ParseCommandLine, from one thread.
#ifndef PSGD_COMMON_CLUSTER_FLAGS_H_
#define PSGD_COMMON_CLUSTER_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "common/cluster_env.h"

ABSL_DECLARE_FLAG(std::string, task);
ABSL_DECLARE_FLAG(std::string, cluster_from);
ABSL_DECLARE_FLAG(int, slurm_port_base);
ABSL_DECLARE_FLAG(bool, print_cluster);

namespace psgd {

// ResolveTask over the flags and the process's environment.
absl::StatusOr<ResolvedCluster> ClusterFromFlags(const ClusterConfig& config);

// True with --print_cluster.
bool PrintClusterRequested();

}  // namespace psgd

#endif  // PSGD_COMMON_CLUSTER_FLAGS_H_
