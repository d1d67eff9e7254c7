// What a worker task takes from the cluster config: its backend, data,
// batches, loop options and how it reaches the servers. Plain conversions,
// tested without a network; //worker:worker glues them together.
//
// Thread-safety: pure functions.
#ifndef PSGD_WORKER_CLUSTER_WORKER_CONFIG_H_
#define PSGD_WORKER_CLUSTER_WORKER_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/cluster_config.h"
#include "ps/client/remote_client.h"
#include "worker/backend_factory/factory.h"
#include "worker/cluster/cluster_worker.h"
#include "worker/data/batcher.h"
#include "worker/data/dataset.h"

namespace psgd {

struct WorkerTaskConfig {
  std::string backend;  // "cpu" or "gpu:K"
  BackendOptions backend_options;
  std::string model;
  DataOptions data;
  BatcherOptions batches;
  ClusterWorkerOptions loop;
  ps::RemoteClientOptions client;  // variables filled from the model registry
};

// For task worker:`index` of a validated config (LoadClusterConfig).
// INVALID_ARGUMENT for an index the config lacks or an unknown model.
// Relative data directories are resolved against the working directory by
// the caller.
absl::StatusOr<WorkerTaskConfig> WorkerTaskFromConfig(
    const ClusterConfig& config, int index);

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_WORKER_CONFIG_H_
