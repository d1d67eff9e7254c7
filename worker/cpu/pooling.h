// Max pooling on the CPU, SAME padding (see PoolShape), on NCHW or on the
// channel-blocked layout of shape.channel_block (op_shapes.h), where the
// loops run over the block's channels innermost.
//
// Thread-safety: pure functions over caller-owned memory; `pool` runs the
// loop (not owned).
#ifndef PSGD_WORKER_CPU_POOLING_H_
#define PSGD_WORKER_CPU_POOLING_H_

#include "common/thread_pool.h"
#include "worker/backend/op_shapes.h"

namespace psgd {

// x: (N, C, H, W)  ->  y: (N, C, OH, OW)
void MaxPoolForwardKernel(const PoolShape& shape, const float* x, float* y,
                          ThreadPool* pool);

// x: (N, C, H, W); dy: (N, C, OH, OW)  ->  dx: (N, C, H, W). Each output's
// gradient goes to the first maximum of its window in row-major order (the
// argmax is recomputed from x). Overwrites dx.
void MaxPoolBackwardKernel(const PoolShape& shape, const float* x,
                           const float* dy, float* dx, ThreadPool* pool);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_POOLING_H_
