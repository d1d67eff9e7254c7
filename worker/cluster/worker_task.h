// One worker task of a cluster config, start to end: the Prometheus page
// (worker.metrics_port), backend, model and data, waiting for the
// parameter servers, the run directory (given, or the chief's choice passed
// on by the servers; the chief's config.pbtxt in it), the task's outputs
// (worker/session/task_outputs.h, shared with the Python worker:
// worker-J.jsonl, the chief's TensorBoard events, worker-J.summary.json and
// the chief's summary.json) feeding /metrics too, and the training loop
// (worker/cluster/cluster_worker.h).
// //worker:worker parses its flags and calls RunWorkerTask.
//
// Thread-safety: RunWorkerTask uses the calling thread (plus the loop's).
#ifndef PSGD_WORKER_CLUSTER_WORKER_TASK_H_
#define PSGD_WORKER_CLUSTER_WORKER_TASK_H_

#include <string>

#include "absl/status/status.h"
#include "common/cluster_config.h"
#include "common/metrics.h"
#include "worker/session/records.h"
#include "worker/session/task_files.h"  // WorkerSummary, RunSummary

namespace psgd {

struct WorkerTaskOptions {
  // The config file, copied into the run directory by the chief.
  std::string config_path;
  // The run directory shared by every task; empty: the chief's
  // RUN_ROOT/NAME-TIMESTAMP, which the others get from the servers.
  std::string run_dir;
};

// Trains as worker task `task` of `config` until the end of training.
// Errors: the config's task (INVALID_ARGUMENT), a metrics port in use, the
// data set's, the servers' (DEADLINE_EXCEEDED when they do not come up),
// the loop's, a run directory that cannot be written.
absl::Status RunWorkerTask(const WorkerTaskOptions& options, const TaskId& task,
                           const ClusterConfig& config);

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_WORKER_TASK_H_
