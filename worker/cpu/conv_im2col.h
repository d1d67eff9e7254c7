// Convolution as im2col + GEMM, image by image: the alternative to oneDNN's
// direct convolution that docs/PERFORMANCE.md measures. The plan owns the
// column buffer (C*KH*KW, H*W) of one image.
//
// Thread-safety: as Conv2dOp (one thread at a time).
#ifndef PSGD_WORKER_CPU_CONV_IM2COL_H_
#define PSGD_WORKER_CPU_CONV_IM2COL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "worker/backend/backend.h"
#include "worker/cpu/gemm.h"

namespace psgd {

// INVALID_ARGUMENT for an invalid shape. `pool` is not owned and must
// outlive the op.
absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateIm2colConv2d(
    const Conv2dShape& shape, const GemmConfig& gemm, ThreadPool* pool);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_CONV_IM2COL_H_
