#include "worker/data/synthetic.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/random.h"

namespace psgd {
namespace {

constexpr double kPi = 3.141592653589793;
constexpr int64_t kSize = ImageSet::kSize;
constexpr int64_t kPlane = kSize * kSize;
// Fixed, so that every seed shares the classes.
constexpr uint64_t kClassSeed = 0x5eed0c1a55e5ULL;

struct ClassPattern {
  bool horizontal;   // stripes along rows (vary with h) or columns
  double frequency;  // cycles across the image
  double colour[3];  // per-channel amplitude of the stripes
  double base[3];    // per-channel mean
};

ClassPattern PatternOf(int64_t label) {
  constexpr double kFrequencies[5] = {1.5, 2.5, 3.5, 5.0, 7.0};
  Rng rng(DeriveSeed({kClassSeed, static_cast<uint64_t>(label)}));
  ClassPattern p;
  p.horizontal = label % 2 == 0;
  p.frequency = kFrequencies[label / 2];
  for (int c = 0; c < 3; ++c) {
    p.colour[c] = rng.Uniform(-60.0, 60.0);
    p.base[c] = rng.Uniform(90.0, 170.0);
  }
  return p;
}

}  // namespace

absl::StatusOr<ImageSet> MakeSyntheticSet(int64_t count, uint64_t seed) {
  if (count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic set: count is ", count, ", must be positive"));
  }
  ClassPattern patterns[ImageSet::kClasses];
  for (int64_t k = 0; k < ImageSet::kClasses; ++k) patterns[k] = PatternOf(k);
  ImageSet set;
  set.pixels.resize(count * ImageSet::kImageBytes);
  set.labels.resize(count);
  Rng rng(seed);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t label = i % ImageSet::kClasses;
    const ClassPattern& p = patterns[label];
    set.labels[i] = static_cast<uint8_t>(label);
    const double phase = rng.Uniform(0.0, 2.0 * kPi);
    const double gain = rng.Uniform(0.6, 1.4);
    uint8_t* image = set.pixels.data() + i * ImageSet::kImageBytes;
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t h = 0; h < kSize; ++h) {
        for (int64_t w = 0; w < kSize; ++w) {
          // Symmetric about the centre column, so a flip keeps the class.
          const double pos = p.horizontal ? h : std::abs(w - 15.5);
          const double stripe =
              std::sin(2.0 * kPi * p.frequency * pos / kSize + phase);
          const double v =
              p.base[c] + gain * p.colour[c] * stripe + 30.0 * rng.Normal();
          image[c * kPlane + h * kSize + w] =
              static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
        }
      }
    }
  }
  return set;
}

}  // namespace psgd
