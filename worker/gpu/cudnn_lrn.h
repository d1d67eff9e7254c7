// The GPU backend's local response normalisation: cuDNN's cross-channel LRN
// where its limits allow, else (or with lrn=kernel) the kernels of lrn.h.
//
// TensorFlow's definition (LrnParams) maps onto cuDNN's with the window
// n = 2 * depth_radius + 1 and alpha_cudnn = n * alpha (cuDNN divides alpha
// by n; TensorFlow's stream executor makes the same conversion). cuDNN
// requires n <= 16 (depth_radius <= 7), beta >= 0.01 and bias >= 1e-5; the
// kernel also takes windows wider than the channels.
//
// Thread-safety: as LrnOp (one thread at a time).
#ifndef PSGD_WORKER_GPU_CUDNN_LRN_H_
#define PSGD_WORKER_GPU_CUDNN_LRN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/gpu/gpu_context.h"

namespace psgd::gpu {

// Whether cuDNN's LRN can compute these parameters.
bool CudnnSupportsLrn(const LrnParams& params);

// INVALID_ARGUMENT for an invalid shape. `context` is not owned and must
// outlive the op.
absl::StatusOr<std::unique_ptr<LrnOp>> CreateGpuLrn(const LrnShape& shape,
                                                    GpuContext* context);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_CUDNN_LRN_H_
