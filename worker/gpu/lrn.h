// Local response normalisation kernels of the GPU backend (TensorFlow's
// definition, see LrnParams in worker/backend/op_shapes.h). The backend uses
// cuDNN's LRN where its limits allow (window 2r+1 <= 16, beta >= 0.01,
// bias >= 1e-5) and these kernels otherwise, or always with lrn=kernel.
// One thread per element, each summing its channel window directly (no
// running sums, so no cancellation).
//
// CPU reference: worker/cpu/lrn.h. Launchers enqueue on `stream` and return
// the launch status; pointers are device memory.
//
// Thread-safety: launchers may be called from any thread.
#ifndef PSGD_WORKER_GPU_LRN_H_
#define PSGD_WORKER_GPU_LRN_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"

namespace psgd::gpu {

// The shape and constants of one LRN plan. inner = H * W.
struct LrnGeometry {
  int64_t batch = 0, channels = 0, inner = 0;
  int64_t depth_radius = 0;
  float bias = 1.0f, alpha = 0.0f, beta = 0.0f;
};

// x: (N, C, inner)  ->  y: (N, C, inner) = x * s^-beta, with s = bias +
// alpha * (sum of x^2 over the channel window).
absl::Status LaunchLrnForward(const LrnGeometry& g, const float* x, float* y,
                              cudaStream_t stream);

// x, y, dy: (N, C, inner)  ->  dx: (N, C, inner),
//   dx[c] = dy[c] * s[c]^-beta
//           - 2 * alpha * beta * x[c] * sum over c' in the window of c of
//             dy[c'] * y[c'] / s[c']
// scratch: (N, C, inner) floats for dy * y / s.
absl::Status LaunchLrnBackward(const LrnGeometry& g, const float* x,
                               const float* y, const float* dy, float* dx,
                               float* scratch, cudaStream_t stream);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_LRN_H_
