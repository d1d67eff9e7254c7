// What a worker task reads and writes in the run directory, for every
// worker program (the C++ task, worker/cluster/worker_task.h, and the
// Python one, worker/session/external_worker.h): the run directory itself
// (given, or the chief's choice that the servers pass on), the chief's copy
// of the config, and what the summaries hold (worker-J.summary.json; the
// chief's summary.json; task_outputs.h writes them).
//
// Thread-safety: free functions; OpenRunDir blocks the calling thread.
#ifndef PSGD_WORKER_SESSION_TASK_FILES_H_
#define PSGD_WORKER_SESSION_TASK_FILES_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster_config.h"
#include "common/metrics.h"
#include "ps/client/remote_client.h"
#include "worker/session/records.h"
#include "worker/session/recovery.h"

namespace psgd {

// The run directory: `requested` (a user path; may be empty), or else the
// chief's RUN_ROOT/NAME-TIMESTAMP, which it sends with Initialize and the
// servers pass on to everyone else (a non-chief waits up to
// `start_timeout` for it). Creates the client from `client_options` on the
// way (it carries the chief's choice in run_dir) and waits, up to
// `start_timeout`, until every server serves (PsClient::AwaitServing). The
// chief copies `config_path` into the directory as config.pbtxt. Errors: the
// client's, DEADLINE_EXCEEDED naming the servers that did not serve in time
// or when no run directory comes, a directory or file that cannot be
// written; CANCELLED once `stop` (may be null) is set while it waits for
// the servers (a signal: within a second or two of it).
// A worker task that cannot go on (its model is not the cluster's, its data
// or a file cannot be read, ...) tells the servers why (PsClient::
// LeaveFailed), so that the chief ends the job with that reason at once
// (docs/CLUSTER.md, "Workers that fail"). CANCELLED (the servers shut down:
// training is over) and UNAVAILABLE (no server to tell) are not reported.
// Best effort: `client`, or one made from `options` when null (before the
// task had one), with a short deadline; what the report itself met is
// logged, not returned.
void ReportWorkerFailure(ps::PsClient* client,
                         const ps::RemoteClientOptions& options,
                         absl::string_view task, const absl::Status& failure);

absl::StatusOr<std::string> OpenRunDir(
    const std::string& requested, const std::string& config_path,
    const ClusterConfig& config, bool chief, absl::Duration start_timeout,
    ps::RemoteClientOptions* client_options,
    std::unique_ptr<ps::RemotePsClient>* client,
    const WaitStop* stop = nullptr);

// RUN_DIR/summary.json: the chief writes it once the job has ended (the
// servers shut down); the other workers read its appearance as that end
// (SessionOptions::job_end_marker).
std::string RunSummaryPath(const std::string& run_dir);

// worker-J.summary.json, and the chief's run summary.json (the servers'
// counters summed over the shards, the rollbacks they survived).
JsonObject WorkerSummary(const std::string& task,
                         const ClusterWorkerResult& result);
JsonObject RunSummary(const ClusterConfig& config,
                      const ClusterWorkerResult& result);

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_TASK_FILES_H_
