#include "ps/state/sync_aggregator.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace psgd {
namespace ps {
namespace {

// sum += g and sum /= n, compiled for AVX-512, AVX2 and the baseline.
__attribute__((target_clones("avx512f", "avx2", "default"))) void AddTo(
    int64_t n, const float* __restrict g, float* __restrict sum) {
  for (int64_t i = 0; i < n; ++i) sum[i] += g[i];
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void DivideBy(
    int64_t n, float d, float* __restrict sum) {
  for (int64_t i = 0; i < n; ++i) sum[i] /= d;
}

}  // namespace

SyncAggregator::Verdict SyncAggregator::Classify(int64_t current_step,
                                                 int64_t gradient_step) {
  if (gradient_step > current_step) return Verdict::kFuture;
  if (gradient_step == current_step) return Verdict::kAccept;
  if (gradient_step == current_step - 1) return Verdict::kSurplus;
  return Verdict::kStale;
}

SyncAggregator::SyncAggregator(std::vector<int64_t> sizes,
                               int replicas_to_aggregate)
    : sizes_(std::move(sizes)), replicas_to_aggregate_(replicas_to_aggregate) {
  for (int64_t n : sizes_) sum_.emplace_back(static_cast<size_t>(n));
  has_.assign(sizes_.size(), false);
}

void SyncAggregator::Add(absl::Span<const float* const> grads) {
  for (size_t k = 0; k < sizes_.size(); ++k) {
    float* sum = sum_[k].data();
    const float* g = grads[k];
    if (g == nullptr) continue;
    if (!has_[k]) {
      std::memcpy(sum, g, sizes_[k] * sizeof(float));
      has_[k] = true;
    } else {
      AddTo(sizes_[k], g, sum);
    }
  }
  ++count_;
}

int64_t SyncAggregator::bytes() const {
  int64_t n = 0;
  for (const AlignedBuffer& b : sum_) n += b.size() * int64_t{sizeof(float)};
  return n;
}

int SyncAggregator::Required(int num_live) const {
  if (backups_ >= 0) return std::max(1, num_live - backups_);
  return std::max(1, std::min(replicas_to_aggregate_, num_live));
}

std::vector<const float*> SyncAggregator::Mean() {
  const float n = static_cast<float>(count_);
  std::vector<const float*> out;
  for (size_t k = 0; k < sizes_.size(); ++k) {
    float* sum = sum_[k].data();
    if (!has_[k]) {
      out.push_back(nullptr);
      continue;
    }
    if (count_ > 1) {
      DivideBy(sizes_[k], n, sum);
    }
    out.push_back(sum);
  }
  return out;
}

}  // namespace ps
}  // namespace psgd
