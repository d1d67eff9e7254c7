// What a worker task writes in its run directory while it trains, opened in
// one place for every front end (the C++ worker, worker/cluster/
// worker_task.h, and the one driven from Python, worker/session/
// external_worker.h). The run directory itself comes first (OpenRunDir,
// worker/session/task_files.h: the Python worker checks its variables
// against the servers between the two, so that a refused worker writes
// nothing). In RUN_DIR, for worker task J:
//
//   worker-J.jsonl            a line per step and per evaluation
//                             (metric_sinks.h); appended to: a restarted
//                             worker adds to the lines of the one before
//   events.out.tfevents.*.worker-J
//                             the chief's TensorBoard scalars
//   samples-worker-J.jsonl    data { record_samples: true }: each push's
//                             samples (sample_records.h; its loop opens it)
//   worker-J.batch_norm       the C++ worker's LOCAL batch norm statistics
//   worker-J.summary.json     at the end; and the chief's summary.json
//
// Each step's line carries the payload bytes its pushes and pulls sent and
// received, from the client's counters since the step before (since Open
// for the first).
//
// Thread-safety: thread-compatible: one thread (the training loop) writes
// the steps, the evaluations and the summaries.
#ifndef PSGD_WORKER_SESSION_TASK_OUTPUTS_H_
#define PSGD_WORKER_SESSION_TASK_OUTPUTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/cluster_config.h"
#include "common/event_file.h"
#include "common/metrics.h"
#include "ps/client/remote_client.h"
#include "worker/session/metric_sinks.h"
#include "worker/session/records.h"
#include "worker/session/worker_metrics.h"

namespace psgd {

struct TaskOutputsOptions {
  // The run directory; it exists (OpenRunDir made it).
  std::string run_dir;
  // A worker task ("worker:J").
  TaskId task;
  // The chief also writes TensorBoard events and the run's summary.json.
  bool chief = false;
  // data { record_samples: true }: samples_file() names the file.
  bool record_samples = false;
  // The training set's size, on every step line when > 0 (StepContext).
  int64_t train_examples = 0;
};

class TaskOutputs {
 public:
  // Opens worker-J.jsonl (appending) and the chief's event file. `client`:
  // whose payload counters give each step's bytes (null: no bytes on the
  // lines); `prometheus`: the worker's page, or null. Neither is owned;
  // each must outlive this. Errors: the writers' (INTERNAL or NOT_FOUND
  // naming a file that cannot be opened).
  static absl::StatusOr<std::unique_ptr<TaskOutputs>> Open(
      TaskOutputsOptions options, const ps::RemotePsClient* client,
      WorkerMetrics* prometheus);
  TaskOutputs(const TaskOutputs&) = delete;
  TaskOutputs& operator=(const TaskOutputs&) = delete;

  const std::string& run_dir() const { return options_.run_dir; }
  // RUN_DIR/samples-worker-J.jsonl with record_samples; else "".
  std::string samples_file() const;
  // RUN_DIR/worker-J.batch_norm.
  std::string local_statistics_file() const;
  // RUN_DIR/summary.json, whose appearance ends the job for the workers
  // that are not the chief (SessionOptions::job_end_marker).
  std::string job_end_marker() const;

  // A step's line (with its payload bytes), scalars and counters; an
  // evaluation's. Errors: the writers' (a file that cannot be written).
  absl::Status WriteStep(const StepRecord& record);
  absl::Status WriteEval(const EvalRecord& record);

  // worker-J.summary.json; the chief's summary.json as well. Errors: a file
  // that cannot be written.
  absl::Status WriteSummaries(const ClusterConfig& config,
                              const ClusterWorkerResult& result);

 private:
  TaskOutputs(TaskOutputsOptions options, const ps::RemotePsClient* client,
              std::unique_ptr<MetricsWriter> jsonl,
              std::unique_ptr<EventFileWriter> events,
              WorkerMetrics* prometheus);
  // RUN_DIR/worker-J
  std::string Prefix() const;

  const TaskOutputsOptions options_;
  const ps::RemotePsClient* const client_;  // Not owned; may be null.
  const std::unique_ptr<MetricsWriter> jsonl_;
  const std::unique_ptr<EventFileWriter> events_;  // the chief's; else null
  MetricSinks sinks_;
  ps::RemotePsClient::PayloadBytes last_bytes_;  // at the last step's line
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_TASK_OUTPUTS_H_
