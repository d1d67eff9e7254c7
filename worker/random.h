// A small seeded random number generator whose sequences are the same on
// every platform and standard library (std::normal_distribution and friends
// are not), for initial weights, shuffling and augmentation.
//
// Thread-safety: an Rng is used by one thread at a time.
#ifndef PSGD_WORKER_RANDOM_H_
#define PSGD_WORKER_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace psgd {

// SplitMix64's finaliser: a good 64-bit mix, for deriving seeds.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A seed derived from several values (e.g. seed, worker index, epoch).
inline uint64_t DeriveSeed(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x2545f4914f6cdd1dULL;
  for (uint64_t p : parts) h = Mix64(h ^ Mix64(p));
  return h;
}

// xoshiro256** seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : state_) {
      seed += 0x9e3779b97f4a7c15ULL;
      s = Mix64(seed);
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; the bias is
  // below 2^-32 for the n used here).
  uint64_t UniformInt(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >>
                                 64);
  }
  bool Bernoulli() { return (Next() >> 63) != 0; }
  // Standard normal (Box-Muller, one value per call).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace psgd

#endif  // PSGD_WORKER_RANDOM_H_
