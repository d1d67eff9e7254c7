// The GPU backend's fully connected layer: three cuBLAS SGEMMs and this
// folder's bias kernels. Row-major (N, K) . (K, M) products are issued as the
// column-major products of the transposes, so no data is transposed:
//   forward          y^T (M, N)  = w^T (M, K) . x^T (K, N)
//   backward data    dx^T (K, N) = w (K, M) . dy^T (M, N)
//   backward weights dw^T (M, K) = dy^T (M, N) . x (N, K)
// Math: plain float32 unless options.tf32 (cublas_util.h).
//
// Thread-safety: as DenseOp (one thread at a time).
#ifndef PSGD_WORKER_GPU_CUBLAS_DENSE_H_
#define PSGD_WORKER_GPU_CUBLAS_DENSE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/gpu/gpu_context.h"

namespace psgd::gpu {

// INVALID_ARGUMENT for an invalid shape or one beyond cuBLAS's int
// dimensions. `context` is not owned and must outlive the op.
absl::StatusOr<std::unique_ptr<DenseOp>> CreateCublasDense(
    const DenseShape& shape, GpuContext* context);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_CUBLAS_DENSE_H_
