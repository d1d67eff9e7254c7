#include "worker/data/augment.h"

#include <algorithm>
#include <cmath>

namespace psgd {
namespace {

constexpr int64_t kSize = 32;
constexpr int64_t kPlane = kCropSize * kCropSize;

// image: (3, 32, 32)  ->  out: (3, 24, 24) from offset (top, left),
// mirrored left-right when `flip`.
void Crop(const uint8_t* image, int64_t top, int64_t left, bool flip,
          float* out) {
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t h = 0; h < kCropSize; ++h) {
      const uint8_t* row = image + (c * kSize + top + h) * kSize + left;
      float* dst = out + c * kPlane + h * kCropSize;
      for (int64_t w = 0; w < kCropSize; ++w) {
        dst[w] = row[flip ? kCropSize - 1 - w : w];
      }
    }
  }
}

}  // namespace

void StandardizeImage(int64_t n, float* x) {
  double sum = 0.0, sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sum_sq += double{x[i]} * x[i];
  }
  const double mean = sum / n;
  const double variance = std::max(sum_sq / n - mean * mean, 0.0);
  const double adjusted =
      std::max(std::sqrt(variance), 1.0 / std::sqrt(static_cast<double>(n)));
  const float m = static_cast<float>(mean);
  const float inv = static_cast<float>(1.0 / adjusted);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - m) * inv;
}

void DistortImage(const uint8_t* image, Rng* rng, float* out) {
  const int64_t range = kSize - kCropSize + 1;  // offsets 0..8
  const int64_t top = static_cast<int64_t>(rng->UniformInt(range));
  const int64_t left = static_cast<int64_t>(rng->UniformInt(range));
  const bool flip = rng->Bernoulli();
  Crop(image, top, left, flip, out);

  const float delta = static_cast<float>(rng->Uniform(-63.0, 63.0));
  for (int64_t i = 0; i < kCropPixels; ++i) out[i] += delta;

  const float factor = static_cast<float>(rng->Uniform(0.2, 1.8));
  for (int64_t c = 0; c < 3; ++c) {
    float* plane = out + c * kPlane;
    double sum = 0.0;
    for (int64_t i = 0; i < kPlane; ++i) sum += plane[i];
    const float mean = static_cast<float>(sum / kPlane);
    for (int64_t i = 0; i < kPlane; ++i) {
      plane[i] = (plane[i] - mean) * factor + mean;
    }
  }
  StandardizeImage(kCropPixels, out);
}

void CentralCropImage(const uint8_t* image, float* out) {
  const int64_t offset = (kSize - kCropSize) / 2;
  Crop(image, offset, offset, /*flip=*/false, out);
  StandardizeImage(kCropPixels, out);
}

void PadCropFlipNormalize(const uint8_t* image, Rng* rng, float* out) {
  constexpr int64_t kPad = 4;
  const int64_t top = static_cast<int64_t>(rng->UniformInt(2 * kPad + 1));
  const int64_t left = static_cast<int64_t>(rng->UniformInt(2 * kPad + 1));
  const bool flip = rng->UniformInt(2) == 1;
  for (int64_t c = 0; c < 3; ++c) {
    const float scale = 1.0f / (255.0f * kCifarStd[c]);
    const float zero = -kCifarMean[c] / kCifarStd[c];
    for (int64_t h = 0; h < kCifarSize; ++h) {
      const int64_t ih = h + top - kPad;
      float* dst = out + (c * kCifarSize + h) * kCifarSize;
      for (int64_t w = 0; w < kCifarSize; ++w) {
        // The output column w reads the padded crop's column w, or its
        // mirror image when flipped.
        const int64_t iw = (flip ? kCifarSize - 1 - w : w) + left - kPad;
        const bool inside =
            ih >= 0 && ih < kCifarSize && iw >= 0 && iw < kCifarSize;
        dst[w] =
            inside
                ? image[(c * kCifarSize + ih) * kCifarSize + iw] * scale + zero
                : zero;
      }
    }
  }
}

void NormalizeCifarImage(const uint8_t* image, float* out) {
  for (int64_t c = 0; c < 3; ++c) {
    const float scale = 1.0f / (255.0f * kCifarStd[c]);
    const float zero = -kCifarMean[c] / kCifarStd[c];
    for (int64_t i = 0; i < kCifarSize * kCifarSize; ++i) {
      const int64_t k = c * kCifarSize * kCifarSize + i;
      out[k] = image[k] * scale + zero;
    }
  }
}

}  // namespace psgd
