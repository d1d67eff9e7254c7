// The GPU backend's ops that are this folder's kernels alone: max pooling
// (pooling.h says why not cuDNN's), softmax cross-entropy and batch norm
// (batch_norm.h: float64 statistics, as the CPU op).
//
// Thread-safety: as MaxPoolOp / SoftmaxCrossEntropyOp (one thread at a
// time).
#ifndef PSGD_WORKER_GPU_KERNEL_OPS_H_
#define PSGD_WORKER_GPU_KERNEL_OPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/gpu/gpu_context.h"

namespace psgd::gpu {

// INVALID_ARGUMENT for an invalid shape. `context` is not owned and must
// outlive the op.
absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateGpuBatchNorm(
    const BatchNormShape& shape, GpuContext* context);

absl::StatusOr<std::unique_ptr<MaxPoolOp>> CreateGpuMaxPool(
    const PoolShape& shape, GpuContext* context);

// Run() uploads the labels, runs the kernels and waits for the 16 bytes of
// totals: it returns with the loss on the host. INVALID_ARGUMENT for an
// invalid shape, and from Run() for a label outside [0, K) (checked on the
// host first; nothing is written then).
absl::StatusOr<std::unique_ptr<SoftmaxCrossEntropyOp>>
CreateGpuSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape& shape,
                             GpuContext* context);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_KERNEL_OPS_H_
