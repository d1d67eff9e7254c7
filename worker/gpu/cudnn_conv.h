// The GPU backend's convolution: cuDNN's forward, backward-data and
// backward-filter convolutions, this folder's kernels for the bias.
//
// The plan (created once per shape) chooses one algorithm per direction,
// either by timing every algorithm cuDNN offers on scratch buffers of the
// plan's shape (cudnnFind*AlgorithmEx, conv_algo=find) or from cuDNN's
// heuristics (cudnnGet*Algorithm_v7, conv_algo=heuristic), keeping only
// algorithms that fit options.workspace_limit_bytes, that use plain float32
// FMA math unless options.tf32, and that are deterministic if
// options.deterministic. It then grows the backend's one shared workspace to
// what the chosen algorithms need, so a run never allocates.
//
// SAME padding with an even kernel is asymmetric (one more row / column
// after), which a cuDNN convolution descriptor cannot express: such plans
// pad the input explicitly into a plan-owned buffer (and crop the data
// gradient back), as TensorFlow's GPU convolution does.
//
// Thread-safety: as Conv2dOp (one thread at a time).
#ifndef PSGD_WORKER_GPU_CUDNN_CONV_H_
#define PSGD_WORKER_GPU_CUDNN_CONV_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/gpu/gpu_context.h"

namespace psgd::gpu {

// INVALID_ARGUMENT for an invalid shape; INTERNAL when cuDNN offers no
// algorithm within the limits (the message says which); RESOURCE_EXHAUSTED
// when the workspace or the padding buffers do not fit. `context` is not
// owned and must outlive the op.
absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateCudnnConv2d(
    const Conv2dShape& shape, GpuContext* context);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_CUDNN_CONV_H_
