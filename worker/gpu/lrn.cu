#include <algorithm>

#include "worker/gpu/cuda_status.h"
#include "worker/gpu/lrn.h"

namespace psgd::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

int BlocksFor(int64_t n) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// The position of element i of (N, C, inner): its channel, and the offset of
// channel 0 of its column.
struct Column {
  int64_t channel;
  int64_t base;  // (n * C) * inner + position in the plane
};

__device__ __forceinline__ Column ColumnOf(const LrnGeometry& g, int64_t i) {
  const int64_t n = i / (g.channels * g.inner);
  const int64_t c = (i / g.inner) % g.channels;
  return {c, n * g.channels * g.inner + i % g.inner};
}

// sum over c' in [c - r, c + r] clipped to [0, C) of v[c']^2 (squared) or
// v[c'] (plain), along one column, in ascending c' as the CPU does.
template <bool kSquared>
__device__ __forceinline__ float WindowSum(const LrnGeometry& g, Column col,
                                           const float* __restrict__ v) {
  const int64_t lo =
      col.channel - g.depth_radius > 0 ? col.channel - g.depth_radius : 0;
  const int64_t hi = col.channel + g.depth_radius < g.channels - 1
                         ? col.channel + g.depth_radius
                         : g.channels - 1;
  float sum = 0.0f;
  for (int64_t k = lo; k <= hi; ++k) {
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
__global__ void LrnForwardKernel(LrnGeometry g, const float* __restrict__ x,
                                 float* __restrict__ y) {
  const int64_t total = g.batch * g.channels * g.inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float s = g.bias + g.alpha * WindowSum<true>(g, ColumnOf(g, i), x);
    y[i] = x[i] * PowNegBeta(s, g.beta);
  }
}

// scratch = dy * y / s, one thread per element.
__global__ void LrnBackwardRatioKernel(LrnGeometry g,
                                       const float* __restrict__ x,
                                       const float* __restrict__ y,
                                       const float* __restrict__ dy,
                                       float* __restrict__ scratch) {
  const int64_t total = g.batch * g.channels * g.inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float s = g.bias + g.alpha * WindowSum<true>(g, ColumnOf(g, i), x);
    scratch[i] = dy[i] * y[i] / s;
  }
}

// dx = dy * s^-beta - 2 alpha beta x * (window sum of scratch).
__global__ void LrnBackwardKernel(LrnGeometry g, const float* __restrict__ x,
                                  const float* __restrict__ dy,
                                  const float* __restrict__ scratch,
                                  float* __restrict__ dx) {
  const int64_t total = g.batch * g.channels * g.inner;
  const float k = -2.0f * g.alpha * g.beta;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Column col = ColumnOf(g, i);
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
  LrnForwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(g, x, y);
  return KernelLaunchStatus("LrnForwardKernel");
}

absl::Status LaunchLrnBackward(const LrnGeometry& g, const float* x,
                               const float* y, const float* dy, float* dx,
                               float* scratch, cudaStream_t stream) {
  const int64_t total = g.batch * g.channels * g.inner;
  LrnBackwardRatioKernel<<<BlocksFor(total), kThreads, 0, stream>>>(g, x, y, dy,
                                                                    scratch);
  absl::Status s = KernelLaunchStatus("LrnBackwardRatioKernel");
  if (!s.ok()) return s;
  LrnBackwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(g, x, dy,
                                                               scratch, dx);
  return KernelLaunchStatus("LrnBackwardKernel");
}

}  // namespace psgd::gpu
