// Delay compensation for async mode (DC-ASGD: Zheng et al., "Asynchronous
// Stochastic Gradient Descent with Delay Compensation", 2017). A gradient g
// computed from weights w_then that reaches the shard when its weights are
// w_now is applied as
//   g' = g + lambda * g * g * (w_now - w_then)
// per element in float32, evaluated as written, left to right:
// ((lambda * g) * g) * (w_now - w_then), then added to g (no FMA).
//
// The shard records, per worker, the weights snapshot its last pull was
// answered with: a reference to the immutable snapshot (no copy; it keeps
// at most one older weights version alive per worker). A push computed from
// step s is compensated when the worker's recorded snapshot is of step s;
// otherwise (no pull recorded since the shard started, restored or rolled
// back, or a pull of another step) it is applied as it came and counted as
// uncompensated.
//
// Batch norm's running statistics (layout statistic[i]) are not
// compensated: their batch values go to the fold as they came.
//
// Thread-safety: none; the shard calls it under its mutex.
#ifndef PSGD_PS_STATE_DELAY_COMPENSATION_H_
#define PSGD_PS_STATE_DELAY_COMPENSATION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

// out[i] = g[i] + lambda * g[i] * g[i] * (w_now[i] - w_then[i]), i < n.
// g, w_now, w_then, out: (n,); out may equal g.
void CompensateDelay(float lambda, int64_t n, const float* g,
                     const float* w_now, const float* w_then, float* out);

class DelayCompensator {
 public:
  using Snapshot = std::shared_ptr<const WeightsSnapshot>;

  // lambda 0: off (records and compensates nothing). Worker ids are
  // 0..num_workers-1.
  DelayCompensator(float lambda, int num_workers)
      : lambda_(lambda), pulled_(static_cast<size_t>(num_workers)) {}
  DelayCompensator(const DelayCompensator&) = delete;
  DelayCompensator& operator=(const DelayCompensator&) = delete;

  bool enabled() const { return lambda_ > 0; }

  // The snapshot a pull of `worker` was answered with (ignored for worker
  // -1 and when off).
  void RecordPull(int worker, Snapshot pulled);

  // The gradients to apply for a push of `worker` computed from `step`,
  // while the shard's weights are `now`. grads[i]: (layout size i,). When
  // the worker's recorded snapshot is of `step`, writes the compensated
  // gradients into buffers of its own (valid until the next call), points
  // (*out)[i] at them, counts the push as compensated and returns true;
  // otherwise sets *out = grads, counts it as uncompensated and returns
  // false. When off: *out = grads, nothing counted.
  bool Compensate(int worker, int64_t step, const WeightsSnapshot& now,
                  const std::vector<const float*>& grads,
                  std::vector<const float*>* out);

  // Forgets every recorded snapshot (a restore or a rollback); the
  // counters stay.
  void Clear();

  // Bytes of the compensated gradients' buffers (the recorded snapshots
  // are the store's versions, counted there).
  int64_t buffer_bytes() const;

  int64_t compensated() const { return compensated_; }
  int64_t uncompensated() const { return uncompensated_; }

 private:
  const float lambda_;
  std::vector<Snapshot> pulled_;             // by worker id; null: none
  std::vector<std::vector<float>> buffers_;  // by variable
  int64_t compensated_ = 0;
  int64_t uncompensated_ = 0;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_DELAY_COMPENSATION_H_
