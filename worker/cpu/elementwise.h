// Element-wise CPU kernels: ReLU, per-channel bias, addition, global average
// pooling, L2 weight decay.
//
// Thread-safety: pure functions over caller-owned memory; `pool` runs the
// loop (not owned).
#ifndef PSGD_WORKER_CPU_ELEMENTWISE_H_
#define PSGD_WORKER_CPU_ELEMENTWISE_H_

#include <cstdint>

#include "common/thread_pool.h"

namespace psgd {

// x, y: (n). y = max(x, 0); y may be x.
void ReluForwardKernel(int64_t n, const float* x, float* y, ThreadPool* pool);

// y, dy, dx: (n). dx = dy where y > 0, else 0; dx may be dy.
void ReluBackwardKernel(int64_t n, const float* y, const float* dy, float* dx,
                        ThreadPool* pool);

// y: (N, C, inner); b: (C). y[n, c, i] += b[c]. inner is H*W for an image
// tensor and 1 for a (N, C) matrix.
void BiasAddKernel(int64_t batch, int64_t channels, int64_t inner,
                   const float* b, float* y, ThreadPool* pool);

// dy: (N, C, inner)  ->  db: (C) = sum over n and i of dy[n, c, i].
// Overwrites db.
void BiasGradKernel(int64_t batch, int64_t channels, int64_t inner,
                    const float* dy, float* db, ThreadPool* pool);

// a, b, y: (n). y = a + b; y may be a or b.
void AddKernel(int64_t n, const float* a, const float* b, float* y,
               ThreadPool* pool);

// a, b, y: (n). y = max(a + b, 0); y may be a or b.
void AddReluKernel(int64_t n, const float* a, const float* b, float* y,
                   ThreadPool* pool);

// x: (rows, inner)  ->  y: (rows) = mean of each row. rows is N*C and inner
// H*W for an image tensor. With a channel block b > 0 (op_shapes.h), x is
// (rows / b, inner, b) and y still (rows); each mean is summed in the same
// order either way.
void GlobalAvgPoolForwardKernel(int64_t rows, int64_t inner, int64_t block,
                                const float* x, float* y, ThreadPool* pool);

// dy: (rows)  ->  dx: (rows, inner) = dy[r] / inner; (rows / b, inner, b)
// with a channel block b > 0.
void GlobalAvgPoolBackwardKernel(int64_t rows, int64_t inner, int64_t block,
                                 const float* dy, float* dx, ThreadPool* pool);

// w, dw: (n). dw += decay * w; returns decay * sum(w^2) / 2.
double L2WeightDecayKernel(int64_t n, const float* w, float decay, float* dw);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_ELEMENTWISE_H_
