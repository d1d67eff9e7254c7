#include "ps/state/delay_compensation.h"

#include <utility>

namespace psgd {
namespace ps {

void CompensateDelay(float lambda, int64_t n, const float* g,
                     const float* w_now, const float* w_then, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = g[i] + lambda * g[i] * g[i] * (w_now[i] - w_then[i]);
  }
}

void DelayCompensator::RecordPull(int worker, Snapshot pulled) {
  if (!enabled() || worker < 0) return;
  pulled_[worker] = std::move(pulled);
}

bool DelayCompensator::Compensate(int worker, int64_t step,
                                  const WeightsSnapshot& now,
                                  const std::vector<const float*>& grads,
                                  std::vector<const float*>* out) {
  *out = grads;
  if (!enabled()) return false;
  const Snapshot& then = pulled_[worker];
  if (then == nullptr || then->step != step ||
      then->weights.size() != grads.size()) {
    ++uncompensated_;
    return false;
  }
  buffers_.resize(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    // A running statistic's batch value is no gradient: it goes as it came.
    if (now.layout != nullptr && now.layout->statistic[i]) continue;
    if (grads[i] == nullptr) continue;  // no gradient: nothing to compensate
    const int64_t n = now.weights[i].size();
    buffers_[i].resize(static_cast<size_t>(n));
    CompensateDelay(lambda_, n, grads[i], now.weights[i].data(),
                    then->weights[i].data(), buffers_[i].data());
    (*out)[i] = buffers_[i].data();
  }
  ++compensated_;
  return true;
}

int64_t DelayCompensator::buffer_bytes() const {
  int64_t n = 0;
  for (const std::vector<float>& b : buffers_) {
    n += static_cast<int64_t>(b.capacity() * sizeof(float));
  }
  return n;
}

void DelayCompensator::Clear() {
  for (Snapshot& s : pulled_) s.reset();
}

}  // namespace ps
}  // namespace psgd
