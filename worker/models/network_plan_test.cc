// PackLives against its promise, on many random sets of lives: two lives
// that meet (their [start, end] times intersect, touching included) never
// share memory; offsets are 64-byte aligned; the arena holds every life and
// is no larger than all of them end to end; lives without a buffer get
// none. Then the greedy placement's own small cases.
#include "worker/models/network_plan.h"

#include <catch2/catch.hpp>
#include <random>

namespace psgd {
namespace {

int64_t Aligned(int64_t n) { return (n + 15) / 16 * 16; }

TEST_CASE("PackLives: lives that meet never share memory") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const int horizon = 1 + static_cast<int>(rng() % 30);
    std::vector<Life> lives(n);
    for (Life& l : lives) {
      if (rng() % 8 == 0) continue;  // no buffer
      l.elements = 1 + static_cast<int64_t>(rng() % 5000);
      l.start = static_cast<int>(rng() % horizon);
      l.end = l.start + static_cast<int>(rng() % 6);
    }
    int64_t arena = -1;
    const std::vector<int64_t> offset = PackLives(lives, &arena);
    REQUIRE(offset.size() == lives.size());
    int64_t all = 0;
    for (int a = 0; a < n; ++a) {
      INFO("trial " << trial << " life " << a);
      if (lives[a].start < 0) {
        CHECK(offset[a] == -1);
        continue;
      }
      all += Aligned(lives[a].elements);
      CHECK(offset[a] >= 0);
      CHECK(offset[a] % 16 == 0);
      CHECK(offset[a] + lives[a].elements <= arena);
      for (int b = a + 1; b < n; ++b) {
        if (lives[b].start < 0) continue;
        const bool meet =
            !(lives[a].end < lives[b].start || lives[b].end < lives[a].start);
        if (!meet) continue;
        INFO("with life " << b);
        const bool apart = offset[a] + lives[a].elements <= offset[b] ||
                           offset[b] + lives[b].elements <= offset[a];
        CHECK(apart);
      }
    }
    CHECK(arena <= all);
  }
}

TEST_CASE("PackLives: lives apart in time share, lives that touch do not") {
  int64_t arena = 0;
  // [0, 1] and [2, 3] never meet: the same memory. [3, 4] touches [2, 3].
  const std::vector<Life> lives = {{100, 0, 1}, {100, 2, 3}, {50, 3, 4}};
  const std::vector<int64_t> offset = PackLives(lives, &arena);
  CHECK(offset[0] == offset[1]);
  CHECK(offset[2] >= offset[1] + 100);
  CHECK(arena == 112 + 64);  // 100 floats take 112 (aligned), 50 take 64
}

}  // namespace
}  // namespace psgd
