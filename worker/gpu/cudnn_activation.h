// ReLU forward and backward through cuDNN's activation functions, for
// tensors of any shape (seen as one row of n elements).
//
// Backward needs x and y; the Backend interface passes only y, which cuDNN
// gets for both: relu(x) > 0 exactly where x > 0, so dx = dy * (y > 0) either
// way (Caffe's in-place cuDNN ReLU does the same).
//
// Thread-safety: one thread at a time (as its backend).
#ifndef PSGD_WORKER_GPU_CUDNN_ACTIVATION_H_
#define PSGD_WORKER_GPU_CUDNN_ACTIVATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/cudnn_util.h"
#include "worker/gpu/gpu_context.h"

namespace psgd::gpu {

class CudnnRelu {
 public:
  // `context` is not owned and must outlive this.
  static absl::StatusOr<CudnnRelu> Create(GpuContext* context);

  // x, y: (n). y = max(x, 0); y may be x.
  absl::Status Forward(int64_t n, const float* x, float* y);
  // y, dy, dx: (n). dx = dy where y > 0, else 0; dx may be dy.
  absl::Status Backward(int64_t n, const float* y, const float* dy, float* dx);

 private:
  CudnnRelu(GpuContext* context, ActivationDescriptor relu,
            TensorDescriptor desc)
      : ctx_(context), relu_(std::move(relu)), desc_(std::move(desc)) {}

  GpuContext* ctx_;  // Not owned.
  ActivationDescriptor relu_;
  TensorDescriptor desc_;  // re-set to (1, 1, 1, n) at each call
};

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_CUDNN_ACTIVATION_H_
