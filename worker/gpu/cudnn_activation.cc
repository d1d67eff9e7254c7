#include "worker/gpu/cudnn_activation.h"

#include <utility>

#include "common/status_macros.h"

namespace psgd::gpu {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

absl::StatusOr<CudnnRelu> CudnnRelu::Create(GpuContext* context) {
  RETURN_IF_ERROR(context->Activate());
  ASSIGN_OR_RETURN(ActivationDescriptor relu, CreateReluDescriptor());
  ASSIGN_OR_RETURN(TensorDescriptor desc, CreateTensorDescriptor(1, 1, 1, 1));
  return CudnnRelu(context, std::move(relu), std::move(desc));
}

absl::Status CudnnRelu::Forward(int64_t n, const float* x, float* y) {
  RETURN_IF_ERROR(ctx_->Activate());
  RETURN_IF_ERROR(SetTensorDescriptor(desc_, 1, 1, 1, n));
  CUDNN_RETURN_IF_ERROR(cudnnActivationForward(ctx_->cudnn(), relu_.get(),
                                               &kOne, desc_.get(), x, &kZero,
                                               desc_.get(), y));
  return absl::OkStatus();
}

absl::Status CudnnRelu::Backward(int64_t n, const float* y, const float* dy,
                                 float* dx) {
  RETURN_IF_ERROR(ctx_->Activate());
  RETURN_IF_ERROR(SetTensorDescriptor(desc_, 1, 1, 1, n));
  CUDNN_RETURN_IF_ERROR(cudnnActivationBackward(
      ctx_->cudnn(), relu_.get(), &kOne, desc_.get(), y, desc_.get(), dy,
      desc_.get(), /*x=*/y, &kZero, desc_.get(), dx));
  return absl::OkStatus();
}

}  // namespace psgd::gpu
