// Local response normalisation across channels on the CPU (TensorFlow's
// definition; see LrnParams).
//
// One pass per image over a (C, H*W) block that stays in cache: the squares
// are summed over the channel window with vectors along H*W, and beta = 0.75
// (the tutorial's) is computed with two square roots instead of pow().
//
// Thread-safety: pure functions over caller-owned memory; `pool` runs the
// loop (not owned).
#ifndef PSGD_WORKER_CPU_LRN_H_
#define PSGD_WORKER_CPU_LRN_H_

#include "common/thread_pool.h"
#include "worker/backend/op_shapes.h"

namespace psgd {

// x: (N, C, H, W)  ->  y: (N, C, H, W)
void LrnForwardKernel(const LrnShape& shape, const float* x, float* y,
                      ThreadPool* pool);

// x, y, dy: (N, C, H, W)  ->  dx: (N, C, H, W), with s = bias + alpha *
// sqr_sum:
//   dx[c] = dy[c] * s[c]^-beta
//           - 2 * alpha * beta * x[c] * sum over c' within depth_radius of c
//             of dy[c'] * y[c'] / s[c']
void LrnBackwardKernel(const LrnShape& shape, const float* x, const float* y,
                       const float* dy, float* dx, ThreadPool* pool);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_LRN_H_
