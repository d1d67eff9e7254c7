#include "ps/state/ssp_clock.h"

#include <algorithm>

namespace psgd {
namespace ps {

int64_t SspClock::SlowestOther(int worker, absl::Span<const int> live) const {
  int64_t slowest = -1;
  for (int v : live) {
    if (v == worker) continue;
    if (slowest < 0 || clocks_[v] < slowest) slowest = clocks_[v];
  }
  return slowest;
}

void SspClock::Join(int worker, absl::Span<const int> live) {
  const int64_t slowest = SlowestOther(worker, live);
  clocks_[worker] = std::max(clocks_[worker], slowest);
}

bool SspClock::MustWait(int worker, absl::Span<const int> live) const {
  if (bound_ < 0 || worker < 0) return false;
  const int64_t slowest = SlowestOther(worker, live);
  return slowest >= 0 && clocks_[worker] > slowest + bound_;
}

void SspClock::Reset() { std::fill(clocks_.begin(), clocks_.end(), 0); }

}  // namespace ps
}  // namespace psgd
