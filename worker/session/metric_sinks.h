// Where a worker's records go, in one place for the cluster worker
// (worker/cluster/worker_task.h) and the local trainer
// (worker/train/local_trainer.h): the run directory's JSONL lines (a
// "train" line per step, an "eval" line per evaluation; scripts/run/compare.py
// reads them), TensorBoard scalars (the chief's; common/event_file.h) and
// the Prometheus page's counters (worker/session/worker_metrics.h).
//
// Thread-safety: thread-compatible; one thread (the training loop) writes.
#ifndef PSGD_WORKER_SESSION_METRIC_SINKS_H_
#define PSGD_WORKER_SESSION_METRIC_SINKS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/event_file.h"
#include "common/metrics.h"
#include "worker/session/records.h"
#include "worker/session/worker_metrics.h"

namespace psgd {

// A step's JSONL line ("kind": "train") and an evaluation's ("eval").
JsonObject StepJson(const std::string& task, const StepRecord& record);
JsonObject EvalJson(const std::string& task, const EvalRecord& record);

// What a step's line carries beyond its record.
struct StepContext {
  // The payload bytes the step's pushes and pulls sent and received (-1:
  // not counted, not written).
  int64_t sent_bytes = -1;
  int64_t received_bytes = -1;
  // The training set's size: a cluster's epochs are the images every
  // worker took over it (scripts/run/compare.py); 0: not written.
  int64_t train_examples = 0;
};

class MetricSinks {
 public:
  // None is owned; `events` and `prometheus` may be null (not written).
  // Each must outlive this.
  MetricSinks(std::string task, MetricsWriter* jsonl, EventFileWriter* events,
              WorkerMetrics* prometheus);

  // The step's line (with the unix time, to line steps up with samples
  // taken outside the process), its scalars and its counters. Errors: the
  // writers' (a file that cannot be written).
  absl::Status WriteStep(const StepRecord& record, const StepContext& context);
  absl::Status WriteEval(const EvalRecord& record);

 private:
  absl::Status WriteStepScalars(const StepRecord& r, const StepContext& c);

  const std::string task_;
  MetricsWriter* const jsonl_;       // Not owned.
  EventFileWriter* const events_;    // Not owned; may be null.
  WorkerMetrics* const prometheus_;  // Not owned; may be null.
  std::map<StepOutcome, int64_t> outcomes_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_METRIC_SINKS_H_
