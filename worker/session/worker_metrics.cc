#include "worker/session/worker_metrics.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace {

// Seconds, from a millisecond to a minute.
std::vector<double> PhaseBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,  0.5,    1,     2.5,  5,     10,   60};
}

}  // namespace

WorkerMetrics::WorkerMetrics(int worker_index)
    : index_(absl::StrCat(worker_index)),
      staleness_({0, 1, 2, 4, 8, 16, 32, 64}) {
  MutexLock lock(&mu_);
  for (const char* phase : {"input", "compute", "push", "pull", "wait"}) {
    phases_.emplace(phase, HistogramData(PhaseBounds()));
  }
}

void WorkerMetrics::Record(const StepRecord& r, int64_t sent_bytes,
                           int64_t received_bytes) {
  MutexLock lock(&mu_);
  ++outcomes_[r.outcome];
  phases_.at("input").Observe(r.input_s);
  phases_.at("compute").Observe(r.compute_s);
  phases_.at("push").Observe(r.push_s);
  phases_.at("pull").Observe(r.pull_s);
  phases_.at("wait").Observe(r.wait_s);
  staleness_.Observe(static_cast<double>(r.staleness));
  sent_ += sent_bytes;
  received_ += received_bytes;
  global_step_ = r.global_step;
  loss_ = r.loss;
  images_per_s_ = r.images_per_s;
}

std::string WorkerMetrics::Text() const {
  MetricsPage page;
  const PrometheusLabels worker = {{"worker", index_}};
  MutexLock lock(&mu_);
  for (StepOutcome o : kAllStepOutcomes) {
    auto it = outcomes_.find(o);
    page.Counter(
        "psgd_worker_steps_total",
        "The worker's steps, by what became of their gradient.",
        it == outcomes_.end() ? 0 : it->second,
        {{"worker", index_}, {"outcome", std::string(StepOutcomeName(o))}});
  }
  for (const auto& [phase, h] : phases_) {
    page.Histogram("psgd_worker_phase_seconds",
                   "Time of each step's phases (input, compute, push, pull, "
                   "wait).",
                   h.upper_bounds, h.counts, h.sum, h.count,
                   {{"worker", index_}, {"phase", phase}});
  }
  page.Histogram("psgd_worker_staleness",
                 "Staleness of the worker's gradients (largest over shards).",
                 staleness_.upper_bounds, staleness_.counts, staleness_.sum,
                 staleness_.count, worker);
  page.Counter("psgd_worker_sent_bytes_total",
               "Payload bytes the worker pushed.", sent_, worker);
  page.Counter("psgd_worker_received_bytes_total",
               "Payload bytes the worker pulled.", received_, worker);
  page.Gauge("psgd_worker_global_step",
             "The global step of the worker's last gradient.", global_step_,
             worker);
  page.Gauge("psgd_worker_loss", "The last step's training loss.", loss_,
             worker);
  page.Gauge("psgd_worker_images_per_second", "The last step's images/s.",
             images_per_s_, worker);
  return page.Text();
}

}  // namespace psgd
