#include "worker/cpu/lrn.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace psgd {
namespace {

// out[c, i] = sum over c' in [c - r, c + r] ∩ [0, C) of in[c', i].
// in, out: (C, inner).
void ChannelWindowSum(int64_t channels, int64_t inner, int64_t radius,
                      const float* in, float* out) {
  for (int64_t c = 0; c < channels; ++c) {
    float* o = out + c * inner;
    const int64_t lo = std::max<int64_t>(c - radius, 0);
    const int64_t hi = std::min<int64_t>(c + radius, channels - 1);
    std::fill(o, o + inner, 0.0f);
    for (int64_t k = lo; k <= hi; ++k) {
      const float* src = in + k * inner;
      for (int64_t i = 0; i < inner; ++i) o[i] += src[i];
    }
  }
}

// scale: (n) holds s = bias + alpha * sqr_sum; writes s^-beta to out.
// Beta = 0.75 is s^-1/2 * (s^-1/2)^1/2, which vectorises.
void PowNegBeta(int64_t n, const float* scale, float beta, float* out) {
  if (beta == 0.75f) {
    for (int64_t i = 0; i < n; ++i) {
      const float r = 1.0f / std::sqrt(scale[i]);
      out[i] = r * std::sqrt(r);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::pow(scale[i], -beta);
  }
}

// image: (C, inner) -> scale: (C, inner) = bias + alpha * window sum of
// squares. `squares` is scratch of the same size.
void ComputeScale(const LrnShape& s, int64_t inner, const float* image,
                  float* squares, float* scale) {
  const int64_t n = s.channels * inner;
  for (int64_t i = 0; i < n; ++i) squares[i] = image[i] * image[i];
  ChannelWindowSum(s.channels, inner, s.params.depth_radius, squares, scale);
  for (int64_t i = 0; i < n; ++i) {
    scale[i] = s.params.bias + s.params.alpha * scale[i];
  }
}

}  // namespace

void LrnForwardKernel(const LrnShape& s, const float* x, float* y,
                      ThreadPool* pool) {
  const int64_t inner = s.height * s.width;
  const int64_t image = s.channels * inner;
  pool->ParallelFor(s.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> squares(image), scale(image);
    for (int64_t b = begin; b < end; ++b) {
      const float* xb = x + b * image;
      float* yb = y + b * image;
      ComputeScale(s, inner, xb, squares.data(), scale.data());
      PowNegBeta(image, scale.data(), s.params.beta, yb);
      for (int64_t i = 0; i < image; ++i) yb[i] *= xb[i];
    }
  });
}

void LrnBackwardKernel(const LrnShape& s, const float* x, const float* y,
                       const float* dy, float* dx, ThreadPool* pool) {
  const int64_t inner = s.height * s.width;
  const int64_t image = s.channels * inner;
  const float k = -2.0f * s.params.alpha * s.params.beta;
  pool->ParallelFor(s.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(image), scale(image), window(image);
    for (int64_t b = begin; b < end; ++b) {
      const float* xb = x + b * image;
      const float* yb = y + b * image;
      const float* dyb = dy + b * image;
      float* dxb = dx + b * image;
      ComputeScale(s, inner, xb, scratch.data(), scale.data());
      // scratch = dy * y / s, summed over the window into `window`.
      for (int64_t i = 0; i < image; ++i) {
        scratch[i] = dyb[i] * yb[i] / scale[i];
      }
      ChannelWindowSum(s.channels, inner, s.params.depth_radius, scratch.data(),
                       window.data());
      PowNegBeta(image, scale.data(), s.params.beta, scratch.data());
      for (int64_t i = 0; i < image; ++i) {
        dxb[i] = dyb[i] * scratch[i] + k * xb[i] * window[i];
      }
    }
  });
}

}  // namespace psgd
