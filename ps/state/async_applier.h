// The rules of async mode on a shard: every admitted gradient is applied on
// arrival; its staleness (the shard's step when it arrives minus the step it
// was computed from) is recorded in a histogram; an optional limit
// (max_push_staleness) refuses gradients staler than it (the bound that
// makes fast workers wait instead is ps/state/ssp_clock.h); optionally the
// learning rate is scaled by 1/staleness (staleness-aware async SGD, with
// staleness 0 counted as 1).
//
// Thread-safety: none; the shard calls it under its mutex.
#ifndef PSGD_PS_STATE_ASYNC_APPLIER_H_
#define PSGD_PS_STATE_ASYNC_APPLIER_H_

#include <cstdint>
#include <map>
#include <utility>

#include "absl/status/statusor.h"

namespace psgd {
namespace ps {

class AsyncApplier {
 public:
  // Staleness values of kMaxTrackedStaleness and more share one bucket
  // (keyed kMaxTrackedStaleness), so that the histogram stays small.
  static constexpr int64_t kMaxTrackedStaleness = 1000;

  // staleness_bound: max_push_staleness, -1 for none, else >= 0.
  AsyncApplier(int64_t staleness_bound, bool scale_lr_by_staleness)
      : staleness_bound_(staleness_bound),
        scale_lr_by_staleness_(scale_lr_by_staleness) {}

  // The staleness of a gradient computed from `gradient_step` that arrives
  // while the shard is at `current_step` (requires gradient_step <=
  // current_step). FAILED_PRECONDITION naming both and the bound when it
  // exceeds the bound.
  absl::StatusOr<int64_t> Admit(int64_t current_step,
                                int64_t gradient_step) const;

  // The learning-rate factor for an admitted gradient.
  double LrScale(int64_t staleness) const;

  // Counts an applied gradient in the histogram.
  void Record(int64_t staleness);
  // staleness -> count.
  const std::map<int64_t, int64_t>& histogram() const { return histogram_; }
  // Replaces the histogram (a restored checkpoint).
  void RestoreHistogram(std::map<int64_t, int64_t> histogram) {
    histogram_ = std::move(histogram);
  }

 private:
  const int64_t staleness_bound_;
  const bool scale_lr_by_staleness_;
  std::map<int64_t, int64_t> histogram_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_ASYNC_APPLIER_H_
