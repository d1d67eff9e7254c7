// Element-wise CUDA kernels of the GPU backend, with a float64-accumulating
// reduction where a sum is involved: bias add and bias gradient (for the
// convolutions and the dense layers), L2 weight decay, Adam, the zero
// padding / cropping that convolutions with asymmetric padding need, the
// residual add and global average pooling.
//
// Every launcher enqueues its kernels on `stream` and returns the launch
// status (see cuda_status.h); errors of the kernels themselves surface at the
// next synchronisation. Pointers are device memory. CPU references:
// worker/cpu/elementwise.h and worker/gpu/adam.h.
//
// Thread-safety: launchers may be called from any thread; the memory they
// touch belongs to the caller.
#ifndef PSGD_WORKER_GPU_ELEMENTWISE_H_
#define PSGD_WORKER_GPU_ELEMENTWISE_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "common/adam.h"

namespace psgd::gpu {

// y: (N, C, inner); b: (C). y[n, c, i] += b[c]. inner is H*W for an image
// tensor and 1 for a (N, C) matrix. With relu, y = max(y + b, 0) (b may
// then be null: y = max(y, 0)).
absl::Status LaunchBiasAdd(int64_t batch, int64_t channels, int64_t inner,
                           const float* b, float* y, cudaStream_t stream,
                           bool relu = false);

// The float64 scratch LaunchBiasGrad needs, in elements.
int64_t BiasGradScratchElements(int64_t batch, int64_t channels);

// dy: (N, C, inner)  ->  db: (C) = sum over n and i of dy[n, c, i], summed in
// float64 in a fixed order (deterministic). Overwrites db. scratch:
// BiasGradScratchElements(batch, channels) doubles.
absl::Status LaunchBiasGrad(int64_t batch, int64_t channels, int64_t inner,
                            const float* dy, float* db, double* scratch,
                            cudaStream_t stream);

// The float64 scratch LaunchL2WeightDecay needs, in elements.
constexpr int64_t kL2WeightDecayScratchElements = 256;

// w, dw: (n). dw += decay * w, and *loss (one device double) = decay *
// sum(w^2) / 2 with the squares summed in float64. scratch:
// kL2WeightDecayScratchElements doubles.
absl::Status LaunchL2WeightDecay(int64_t n, const float* w, float decay,
                                 float* dw, double* scratch, double* loss,
                                 cudaStream_t stream);

// w, g, m, v: (n). One Adam step with the constants `step` (common/adam.h;
// PyTorch's form, worker/gpu/adam.h), each element by AdamElement.
absl::Status LaunchAdam(int64_t n, const AdamStep& step, float* w,
                        const float* g, float* m, float* v,
                        cudaStream_t stream);

// x: (planes, h, w)  ->  xp: (planes, h + top + bottom, w + left + right),
// x placed at (top, left) and zeros around it.
absl::Status LaunchPad2d(int64_t planes, int64_t h, int64_t w, int64_t top,
                         int64_t bottom, int64_t left, int64_t right,
                         const float* x, float* xp, cudaStream_t stream);

// xp: (planes, hp, wp)  ->  x: (planes, h, w) = xp[:, top:top+h,
// left:left+w].
absl::Status LaunchCrop2d(int64_t planes, int64_t h, int64_t w, int64_t hp,
                          int64_t wp, int64_t top, int64_t left,
                          const float* xp, float* x, cudaStream_t stream);

// a, b, y: (n). y = a + b (the residual add; also sums gradients). y may
// be a or b.
// With relu, y = max(a + b, 0).
absl::Status LaunchAdd(int64_t n, const float* a, const float* b, float* y,
                       cudaStream_t stream, bool relu = false);

// x: (planes, inner)  ->  y: (planes), each plane's mean (summed in
// float64): global average pooling with planes = N * C, inner = H * W.
absl::Status LaunchGlobalAvgPool(int64_t planes, int64_t inner, const float* x,
                                 float* y, cudaStream_t stream);

// dy: (planes)  ->  dx: (planes, inner) = dy / inner at every position.
absl::Status LaunchGlobalAvgPoolBackward(int64_t planes, int64_t inner,
                                         const float* dy, float* dx,
                                         cudaStream_t stream);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_ELEMENTWISE_H_
