// Gathers one sync step's gradients on a shard: the rule of TensorFlow's
// ConditionalAccumulator under SyncReplicasOptimizer, with N of M workers
// and a live set.
//
// While the shard is at step c, a gradient computed from step g is
//   g == c      accepted: added to the step's sum;
//   g == c - 1  dropped as surplus: step c-1 was completed by other
//               gradients before this one came (a backup worker's fate);
//   g <  c - 1  dropped as stale: computed from older weights still;
//   g >  c      from the future: the shard refuses it.
// A step is complete when it holds Required(live) = max(1, min(N, live))
// gradients: N normally, fewer when workers have left, and with no live
// worker at all whatever has been gathered (at least one gradient).
// That each worker adds at most one gradient per step is the shard's check
// (Membership::last_push_step), not this object's.
//
// Thread-safety: none; the shard calls it under its mutex.
#ifndef PSGD_PS_STATE_SYNC_AGGREGATOR_H_
#define PSGD_PS_STATE_SYNC_AGGREGATOR_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/tensor.h"

namespace psgd {
namespace ps {

class SyncAggregator {
 public:
  enum class Verdict { kAccept, kSurplus, kStale, kFuture };
  static Verdict Classify(int64_t current_step, int64_t gradient_step);

  // For variables of `sizes` elements; requires replicas_to_aggregate >= 1.
  SyncAggregator(std::vector<int64_t> sizes, int replicas_to_aggregate);

  SyncAggregator(const SyncAggregator&) = delete;
  SyncAggregator& operator=(const SyncAggregator&) = delete;

  // Adds one gradient to the sum. grads[i]: (sizes[i],), or null where the
  // push had no gradient for variable i (a frozen or unused parameter):
  // that push adds nothing to it, and counts as a zero in its mean.
  void Add(absl::Span<const float* const> grads);

  // Gradients gathered for the current step.
  int count() const { return count_; }
  int replicas_to_aggregate() const { return replicas_to_aggregate_; }
  // N from the next step on (adaptive backup workers); >= 1.
  void set_replicas_to_aggregate(int n) { replicas_to_aggregate_ = n; }
  int Required(int num_live) const;
  // N follows the live workers: Required(live) = max(1, live - backups)
  // (the config's replicas_rule LIVE_MINUS_BACKUPS; docs/PS.md).
  void set_backups(int backups) { backups_ = backups; }
  bool IsComplete(int num_live) const {
    return count_ > 0 && count_ >= Required(num_live);
  }

  // Turns the sum into the mean, sum[i] / count(), in float32, and returns
  // pointers to it (valid until the next Add or Reset); null for a variable
  // that no push of the step had a gradient for (the optimizer leaves it
  // alone). A variable only some pushes had is averaged over all count()
  // of them, the others counting as zeros (as PyTorch's DDP with
  // find_unused_parameters). Requires count() > 0.
  std::vector<const float*> Mean();
  // Forgets the gathered gradients: the next step starts.
  void Reset() {
    count_ = 0;
    std::fill(has_.begin(), has_.end(), false);
  }

  // Bytes of the sum (allocated once, for the shard's variables).
  int64_t bytes() const;

 private:
  const std::vector<int64_t> sizes_;
  int replicas_to_aggregate_;
  int backups_ = -1;  // -1: N fixed
  std::vector<AlignedBuffer> sum_;
  std::vector<bool> has_;  // by variable: some push of the step had it
  int count_ = 0;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_SYNC_AGGREGATOR_H_
