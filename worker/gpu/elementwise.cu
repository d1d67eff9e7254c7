#include <algorithm>

#include "worker/gpu/cuda_status.h"
#include "worker/gpu/elementwise.h"
#include "worker/gpu/kernel_util.h"

namespace psgd::gpu {
namespace {

// Images per partial sum of the bias gradient.
constexpr int64_t kMaxBiasGradSplits = 32;

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// y: (N, C, inner); b: (C) or null. total = N * C * inner.
template <typename I>
__global__ void BiasAddKernel(I total, I channels, I inner,
                              const float* __restrict__ b, bool relu,
                              float* __restrict__ y) {
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    float v = y[i];
    if (b != nullptr) v += b[(i / inner) % channels];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

// dy: (N, C, inner) -> partial: (C, splits). Block (s, c) sums images
// [s * per, min((s + 1) * per, N)) of channel c.
__global__ void BiasGradPartialKernel(int64_t batch, int64_t channels,
                                      int64_t inner, int64_t per,
                                      const float* __restrict__ dy,
                                      double* __restrict__ partial) {
  const int64_t s = blockIdx.x, c = blockIdx.y;
  const int64_t n0 = s * per;
  const int64_t n1 = min(n0 + per, batch);
  const int64_t count = n1 > n0 ? (n1 - n0) * inner : 0;
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t n = n0 + j / inner, i = j % inner;
    sum += dy[(n * channels + c) * inner + i];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partial[c * gridDim.x + s] = sum;
}

// partial: (C, splits) -> db: (C).
__global__ void BiasGradFinishKernel(int64_t channels, int64_t splits,
                                     const double* __restrict__ partial,
                                     float* __restrict__ db) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  double sum = 0.0;
  for (int64_t s = 0; s < splits; ++s) sum += partial[c * splits + s];
  db[c] = static_cast<float>(sum);
}

// w, dw: (n) -> dw += decay * w; partial: (gridDim.x) sums of w^2.
__global__ void L2WeightDecayKernel(int64_t n, const float* __restrict__ w,
                                    float decay, float* __restrict__ dw,
                                    double* __restrict__ partial) {
  double sum = 0.0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float wi = w[i];
    sum += static_cast<double>(wi) * wi;
    dw[i] += decay * wi;
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// partial: (blocks) -> *loss = decay * sum / 2. One block.
__global__ void L2WeightDecayFinishKernel(int blocks, float decay,
                                          const double* __restrict__ partial,
                                          double* __restrict__ loss) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) sum += partial[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *loss = static_cast<double>(decay) * sum / 2.0;
}

// w, g, m, v: (n).
__global__ void AdamKernel(int64_t n, AdamStep c, float* __restrict__ w,
                           const float* __restrict__ g, float* __restrict__ m,
                           float* __restrict__ v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    w[i] = AdamElement(c, w[i], g[i], &m[i], &v[i]);
  }
}

// x: (planes, h, w) -> xp: (planes, hp, wp) with x at (top, left).
template <typename I>
__global__ void Pad2dKernel(I total, I h, I w, I hp, I wp, I top, I left,
                            const float* __restrict__ x,
                            float* __restrict__ xp) {
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    const I plane = i / (hp * wp), r = i % (hp * wp);
    const I sy = r / wp - top, sx = r % wp - left;
    xp[i] = (sy >= 0 && sy < h && sx >= 0 && sx < w)
                ? x[(plane * h + sy) * w + sx]
                : 0.0f;
  }
}

// xp: (planes, hp, wp) -> x: (planes, h, w) from (top, left).
template <typename I>
__global__ void Crop2dKernel(I total, I h, I w, I hp, I wp, I top, I left,
                             const float* __restrict__ xp,
                             float* __restrict__ x) {
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    const I plane = i / (h * w), r = i % (h * w);
    x[i] = xp[(plane * hp + r / w + top) * wp + r % w + left];
  }
}

template <typename I>
__global__ void AddKernel(I n, const float* a, const float* b, bool relu,
                          float* y) {
  for (I i = GridStart<I>(); i < n; i += GridStride<I>()) {
    const float v = a[i] + b[i];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

// One block per plane.
__global__ void GlobalAvgPoolKernel(int64_t inner, const float* __restrict__ x,
                                    float* __restrict__ y) {
  const int64_t p = blockIdx.x;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    sum += x[p * inner + i];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) y[p] = static_cast<float>(sum / inner);
}

template <typename I>
__global__ void GlobalAvgPoolBackwardKernel(I total, I inner, float scale,
                                            const float* __restrict__ dy,
                                            float* __restrict__ dx) {
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    dx[i] = dy[i / inner] * scale;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------

absl::Status LaunchBiasAdd(int64_t batch, int64_t channels, int64_t inner,
                           const float* b, float* y, cudaStream_t stream,
                           bool relu) {
  const int64_t total = batch * channels * inner;
  if (FitsInt32(total)) {
    BiasAddKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        static_cast<int>(total), static_cast<int>(channels),
        static_cast<int>(inner), b, relu, y);
  } else {
    BiasAddKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        total, channels, inner, b, relu, y);
  }
  return KernelLaunchStatus("BiasAddKernel");
}

int64_t BiasGradScratchElements(int64_t batch, int64_t channels) {
  return channels * std::min(batch, kMaxBiasGradSplits);
}

absl::Status LaunchBiasGrad(int64_t batch, int64_t channels, int64_t inner,
                            const float* dy, float* db, double* scratch,
                            cudaStream_t stream) {
  const int64_t splits = std::min(batch, kMaxBiasGradSplits);
  const int64_t per = (batch + splits - 1) / splits;
  if (channels > 65535) {
    return absl::InvalidArgumentError(
        "bias gradient: more than 65535 channels");
  }
  BiasGradPartialKernel<<<dim3(static_cast<unsigned>(splits),
                               static_cast<unsigned>(channels)),
                          kThreads, 0, stream>>>(batch, channels, inner, per,
                                                 dy, scratch);
  absl::Status s = KernelLaunchStatus("BiasGradPartialKernel");
  if (!s.ok()) return s;
  BiasGradFinishKernel<<<static_cast<unsigned>((channels + kThreads - 1) /
                                               kThreads),
                         kThreads, 0, stream>>>(channels, splits, scratch, db);
  return KernelLaunchStatus("BiasGradFinishKernel");
}

absl::Status LaunchL2WeightDecay(int64_t n, const float* w, float decay,
                                 float* dw, double* scratch, double* loss,
                                 cudaStream_t stream) {
  const int blocks = static_cast<int>(
      std::min<int64_t>(BlocksFor(n), kL2WeightDecayScratchElements));
  L2WeightDecayKernel<<<blocks, kThreads, 0, stream>>>(n, w, decay, dw,
                                                       scratch);
  absl::Status s = KernelLaunchStatus("L2WeightDecayKernel");
  if (!s.ok()) return s;
  L2WeightDecayFinishKernel<<<1, kThreads, 0, stream>>>(blocks, decay, scratch,
                                                        loss);
  return KernelLaunchStatus("L2WeightDecayFinishKernel");
}

absl::Status LaunchAdam(int64_t n, const AdamStep& params, float* w,
                        const float* g, float* m, float* v,
                        cudaStream_t stream) {
  AdamKernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, params, w, g, m, v);
  return KernelLaunchStatus("AdamKernel");
}

absl::Status LaunchPad2d(int64_t planes, int64_t h, int64_t w, int64_t top,
                         int64_t bottom, int64_t left, int64_t right,
                         const float* x, float* xp, cudaStream_t stream) {
  const int64_t hp = h + top + bottom, wp = w + left + right;
  const int64_t total = planes * hp * wp;  // larger than x
  if (FitsInt32(total)) {
    Pad2dKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        static_cast<int>(total), static_cast<int>(h), static_cast<int>(w),
        static_cast<int>(hp), static_cast<int>(wp), static_cast<int>(top),
        static_cast<int>(left), x, xp);
  } else {
    Pad2dKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        total, h, w, hp, wp, top, left, x, xp);
  }
  return KernelLaunchStatus("Pad2dKernel");
}

absl::Status LaunchCrop2d(int64_t planes, int64_t h, int64_t w, int64_t hp,
                          int64_t wp, int64_t top, int64_t left,
                          const float* xp, float* x, cudaStream_t stream) {
  const int64_t total = planes * h * w;
  if (FitsInt32(planes * hp * wp)) {  // the larger of the two
    Crop2dKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        static_cast<int>(total), static_cast<int>(h), static_cast<int>(w),
        static_cast<int>(hp), static_cast<int>(wp), static_cast<int>(top),
        static_cast<int>(left), xp, x);
  } else {
    Crop2dKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        total, h, w, hp, wp, top, left, xp, x);
  }
  return KernelLaunchStatus("Crop2dKernel");
}

absl::Status LaunchAdd(int64_t n, const float* a, const float* b, float* y,
                       cudaStream_t stream, bool relu) {
  if (FitsInt32(n)) {
    AddKernel<int><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<int>(n),
                                                          a, b, relu, y);
  } else {
    AddKernel<int64_t><<<BlocksFor(n), kThreads, 0, stream>>>(n, a, b, relu, y);
  }
  return KernelLaunchStatus("AddKernel");
}

absl::Status LaunchGlobalAvgPool(int64_t planes, int64_t inner, const float* x,
                                 float* y, cudaStream_t stream) {
  if (planes > 0x7fffffff) {
    return absl::InvalidArgumentError(
        "global average pooling: too many planes");
  }
  GlobalAvgPoolKernel<<<static_cast<unsigned>(planes), kThreads, 0, stream>>>(
      inner, x, y);
  return KernelLaunchStatus("GlobalAvgPoolKernel");
}

absl::Status LaunchGlobalAvgPoolBackward(int64_t planes, int64_t inner,
                                         const float* dy, float* dx,
                                         cudaStream_t stream) {
  const int64_t total = planes * inner;
  const float scale = 1.0f / static_cast<float>(inner);
  if (FitsInt32(total)) {
    GlobalAvgPoolBackwardKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        static_cast<int>(total), static_cast<int>(inner), scale, dy, dx);
  } else {
    GlobalAvgPoolBackwardKernel<int64_t>
        <<<BlocksFor(total), kThreads, 0, stream>>>(total, inner, scale, dy,
                                                    dx);
  }
  return KernelLaunchStatus("GlobalAvgPoolBackwardKernel");
}

}  // namespace psgd::gpu
