// A worker's Prometheus page (GET /metrics of the worker process): steps by
// outcome, each step phase's time as a histogram, bytes pushed and pulled,
// the global step, the loss and images/s of the last step, staleness.
// Updated by the training loop after each step, rendered by the HTTP
// server's thread.
//
// Thread-safety: Record and Text may be called from any thread.
#ifndef PSGD_WORKER_SESSION_WORKER_METRICS_H_
#define PSGD_WORKER_SESSION_WORKER_METRICS_H_

#include <cstdint>
#include <map>
#include <string>

#include "common/mutex.h"
#include "common/prometheus.h"
#include "worker/session/records.h"

namespace psgd {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(int worker_index);

  // One step, with the payload bytes it sent and received.
  void Record(const StepRecord& step, int64_t sent_bytes,
              int64_t received_bytes);
  std::string Text() const;

 private:
  const std::string index_;
  mutable Mutex mu_;
  std::map<StepOutcome, int64_t> outcomes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, HistogramData> phases_ ABSL_GUARDED_BY(mu_);
  HistogramData staleness_ ABSL_GUARDED_BY(mu_);
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t global_step_ ABSL_GUARDED_BY(mu_) = 0;
  double loss_ ABSL_GUARDED_BY(mu_) = 0.0;
  double images_per_s_ ABSL_GUARDED_BY(mu_) = 0.0;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_WORKER_METRICS_H_
