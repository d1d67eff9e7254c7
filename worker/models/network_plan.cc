#include "worker/models/network_plan.h"

#include <algorithm>

namespace psgd {

std::vector<int64_t> PackLives(const std::vector<Life>& lives, int64_t* arena) {
  constexpr int64_t kAlign = 16;
  auto aligned = [](int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(lives.size()); ++i) {
    if (lives[i].start >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return lives[a].elements > lives[b].elements;
  });
  std::vector<int64_t> offset(lives.size(), -1);
  std::vector<int> placed;
  *arena = 0;
  for (int b : order) {
    const Life& life = lives[b];
    const int64_t size = aligned(life.elements);
    // The placed lives this one meets, by offset.
    std::vector<int> met;
    for (int o : placed) {
      if (!(lives[o].end < life.start || life.end < lives[o].start)) {
        met.push_back(o);
      }
    }
    std::sort(met.begin(), met.end(),
              [&](int x, int y) { return offset[x] < offset[y]; });
    int64_t best = -1, best_gap = 0, end = 0;
    for (int o : met) {
      const int64_t gap = offset[o] - end;
      if (gap >= size && (best < 0 || gap < best_gap)) {
        best = end;
        best_gap = gap;
      }
      end = std::max(end, offset[o] + aligned(lives[o].elements));
    }
    offset[b] = best >= 0 ? best : end;
    *arena = std::max(*arena, offset[b] + size);
    placed.push_back(b);
  }
  return offset;
}

}  // namespace psgd
