#include <algorithm>

#include "worker/gpu/cuda_status.h"
#include "worker/gpu/kernel_util.h"
#include "worker/gpu/lrn.h"

namespace psgd::gpu {
namespace {

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// LrnGeometry in the kernel's index type.
template <typename I>
struct Geometry {
  explicit Geometry(const LrnGeometry& g)
      : batch(static_cast<I>(g.batch)),
        channels(static_cast<I>(g.channels)),
        inner(static_cast<I>(g.inner)),
        depth_radius(static_cast<I>(g.depth_radius)),
        bias(g.bias),
        alpha(g.alpha),
        beta(g.beta) {}
  __host__ __device__ I total() const { return batch * channels * inner; }
  I batch, channels, inner, depth_radius;
  float bias, alpha, beta;
};

// The position of element i of (N, C, inner): its channel, and the offset
// of channel 0 of its column.
template <typename I>
struct Column {
  I channel;
  I base;  // (n * C) * inner + position in the plane
};

template <typename I>
__device__ __forceinline__ Column<I> ColumnOf(const Geometry<I>& g, I i) {
  const I n = i / (g.channels * g.inner);
  const I c = (i / g.inner) % g.channels;
  return {c, n * g.channels * g.inner + i % g.inner};
}

// sum over c' in [c - r, c + r] clipped to [0, C) of v[c']^2 (squared) or
// v[c'] (plain), along one column, in ascending c' as the CPU does.
template <bool kSquared, typename I>
__device__ __forceinline__ float WindowSum(const Geometry<I>& g, Column<I> col,
                                           const float* __restrict__ v) {
  const I lo =
      col.channel - g.depth_radius > 0 ? col.channel - g.depth_radius : 0;
  const I hi = col.channel + g.depth_radius < g.channels - 1
                   ? col.channel + g.depth_radius
                   : g.channels - 1;
  float sum = 0.0f;
  for (I k = lo; k <= hi; ++k) {
    const float value = v[col.base + k * g.inner];
    sum += kSquared ? value * value : value;
  }
  return sum;
}

// s^-beta; beta = 0.75 (the tutorial's) as s^-1/2 * (s^-1/2)^1/2.
__device__ __forceinline__ float PowNegBeta(float s, float beta) {
  if (beta == 0.75f) {
    const float r = rsqrtf(s);
    return r * sqrtf(r);
  }
  return powf(s, -beta);
}

// x -> y, one thread per element.
template <typename I>
__global__ void LrnForwardKernel(Geometry<I> g, const float* __restrict__ x,
                                 float* __restrict__ y) {
  for (I i = GridStart<I>(); i < g.total(); i += GridStride<I>()) {
    const float s = g.bias + g.alpha * WindowSum<true>(g, ColumnOf(g, i), x);
    y[i] = x[i] * PowNegBeta(s, g.beta);
  }
}

// scratch = dy * y / s, one thread per element.
template <typename I>
__global__ void LrnBackwardRatioKernel(Geometry<I> g,
                                       const float* __restrict__ x,
                                       const float* __restrict__ y,
                                       const float* __restrict__ dy,
                                       float* __restrict__ scratch) {
  for (I i = GridStart<I>(); i < g.total(); i += GridStride<I>()) {
    const float s = g.bias + g.alpha * WindowSum<true>(g, ColumnOf(g, i), x);
    scratch[i] = dy[i] * y[i] / s;
  }
}

// dx = dy * s^-beta - 2 alpha beta x * (window sum of scratch).
template <typename I>
__global__ void LrnBackwardKernel(Geometry<I> g, const float* __restrict__ x,
                                  const float* __restrict__ dy,
                                  const float* __restrict__ scratch,
                                  float* __restrict__ dx) {
  const float k = -2.0f * g.alpha * g.beta;
  for (I i = GridStart<I>(); i < g.total(); i += GridStride<I>()) {
    const Column<I> col = ColumnOf(g, i);
    const float s = g.bias + g.alpha * WindowSum<true>(g, col, x);
    dx[i] = dy[i] * PowNegBeta(s, g.beta) +
            k * x[i] * WindowSum<false>(g, col, scratch);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------

absl::Status LaunchLrnForward(const LrnGeometry& g, const float* x, float* y,
                              cudaStream_t stream) {
  const int64_t total = g.batch * g.channels * g.inner;
  if (FitsInt32(total)) {
    LrnForwardKernel<int>
        <<<BlocksFor(total), kThreads, 0, stream>>>(Geometry<int>(g), x, y);
  } else {
    LrnForwardKernel<int64_t>
        <<<BlocksFor(total), kThreads, 0, stream>>>(Geometry<int64_t>(g), x, y);
  }
  return KernelLaunchStatus("LrnForwardKernel");
}

absl::Status LaunchLrnBackward(const LrnGeometry& g, const float* x,
                               const float* y, const float* dy, float* dx,
                               float* scratch, cudaStream_t stream) {
  const int64_t total = g.batch * g.channels * g.inner;
  if (FitsInt32(total)) {
    LrnBackwardRatioKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        Geometry<int>(g), x, y, dy, scratch);
  } else {
    LrnBackwardRatioKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        Geometry<int64_t>(g), x, y, dy, scratch);
  }
  absl::Status s = KernelLaunchStatus("LrnBackwardRatioKernel");
  if (!s.ok()) return s;
  if (FitsInt32(total)) {
    LrnBackwardKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        Geometry<int>(g), x, dy, scratch, dx);
  } else {
    LrnBackwardKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        Geometry<int64_t>(g), x, dy, scratch, dx);
  }
  return KernelLaunchStatus("LrnBackwardKernel");
}

}  // namespace psgd::gpu
