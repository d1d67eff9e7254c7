// Max pooling kernels of the GPU backend, TensorFlow's SAME padding (the
// padding before is `pad_top` / `pad_left`, the rest after; padded positions
// never win). An own kernel rather than cuDNN's: cuDNN's pooling descriptor
// has one symmetric padding per dimension, and SAME with an odd total
// padding (both of the tutorial's pools: 24 -> 12 and 12 -> 6 with 3x3/2
// need one row after and none before) cannot be expressed with it.
//
// CPU reference: worker/cpu/pooling.h. Launchers enqueue on `stream` and
// return the launch status; pointers are device memory.
//
// Thread-safety: launchers may be called from any thread.
#ifndef PSGD_WORKER_GPU_POOLING_H_
#define PSGD_WORKER_GPU_POOLING_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"

namespace psgd::gpu {

// The geometry of one pooling plan. planes = N * C.
struct PoolGeometry {
  int64_t planes = 0;
  int64_t height = 0, width = 0;
  int64_t out_height = 0, out_width = 0;
  int64_t window = 0, stride = 0;
  int64_t pad_top = 0, pad_left = 0;
};

// x: (planes, H, W)  ->  y: (planes, OH, OW)
absl::Status LaunchMaxPoolForward(const PoolGeometry& g, const float* x,
                                  float* y, cudaStream_t stream);

// x: (planes, H, W); dy: (planes, OH, OW)  ->  dx: (planes, H, W). Each
// output's gradient goes to the first maximum of its window in row-major
// order (recomputed from x). Gathered per input element, adding the
// contributions in the CPU's order: deterministic, no atomics. Overwrites dx.
absl::Status LaunchMaxPoolBackward(const PoolGeometry& g, const float* x,
                                   const float* dy, float* dx,
                                   cudaStream_t stream);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_POOLING_H_
