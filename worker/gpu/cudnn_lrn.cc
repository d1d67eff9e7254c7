#include "worker/gpu/cudnn_lrn.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/gpu/cudnn_util.h"
#include "worker/gpu/lrn.h"

namespace psgd::gpu {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

class GpuLrnOp : public LrnOp {
 public:
  GpuLrnOp(const LrnShape& shape, GpuContext* context)
      : shape_(shape), name_(shape.ToString()), ctx_(context) {}

  const LrnShape& shape() const override { return shape_; }

  absl::Status Init() {
    const LrnParams& p = shape_.params;
    use_cudnn_ =
        ctx_->options().lrn == GpuLrn::kCudnn && CudnnSupportsLrn(p) &&
        // A precaution: cuDNN's documentation does not say how it clips a
        // window wider than the channels (the kernel clips as TensorFlow).
        2 * p.depth_radius + 1 <= shape_.channels;
    geometry_ = {shape_.batch,   shape_.channels, shape_.height * shape_.width,
                 p.depth_radius, p.bias,          p.alpha,
                 p.beta};
    RETURN_IF_ERROR(ctx_->Activate());
    if (use_cudnn_) {
      const unsigned n = static_cast<unsigned>(2 * p.depth_radius + 1);
      ASSIGN_OR_RETURN(
          desc_, CreateLrnDescriptor(n, double{p.alpha} * n, p.beta, p.bias));
      ASSIGN_OR_RETURN(x_desc_,
                       CreateTensorDescriptor(shape_.batch, shape_.channels,
                                              shape_.height, shape_.width));
    } else {
      ASSIGN_OR_RETURN(
          scratch_,
          DeviceBuffer::Allocate(sizeof(float) * NumElements(shape_.input()),
                                 ctx_->stream()));
    }
    ctx_->NotePlan(absl::StrCat(name_, ": ", use_cudnn_ ? "cuDNN" : "kernel"));
    return absl::OkStatus();
  }

 private:
  absl::Status DoForward(ConstDeviceView x, DeviceView y) override {
    return WithPrefix(RunForward(x.data(), y.data()), name_ + " forward: ");
  }

  absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                          ConstDeviceView dy, DeviceView dx) override {
    return WithPrefix(RunBackward(x.data(), y.data(), dy.data(), dx.data()),
                      name_ + " backward: ");
  }

  // x: (N, C, H, W) -> y: (N, C, H, W)
  absl::Status RunForward(const float* x, float* y) {
    RETURN_IF_ERROR(ctx_->Activate());
    if (!use_cudnn_) return LaunchLrnForward(geometry_, x, y, ctx_->stream());
    CUDNN_RETURN_IF_ERROR(cudnnLRNCrossChannelForward(
        ctx_->cudnn(), desc_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne,
        x_desc_.get(), x, &kZero, x_desc_.get(), y));
    return absl::OkStatus();
  }

  // x, y, dy: (N, C, H, W) -> dx: (N, C, H, W)
  absl::Status RunBackward(const float* x, const float* y, const float* dy,
                           float* dx) {
    RETURN_IF_ERROR(ctx_->Activate());
    if (!use_cudnn_) {
      return LaunchLrnBackward(geometry_, x, y, dy, dx, scratch_.as<float>(),
                               ctx_->stream());
    }
    CUDNN_RETURN_IF_ERROR(cudnnLRNCrossChannelBackward(
        ctx_->cudnn(), desc_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne,
        x_desc_.get(), y, x_desc_.get(), dy, x_desc_.get(), x, &kZero,
        x_desc_.get(), dx));
    return absl::OkStatus();
  }

  const LrnShape shape_;
  const std::string name_;
  GpuContext* const ctx_;  // Not owned.
  bool use_cudnn_ = false;
  LrnGeometry geometry_;
  LrnDescriptor desc_;       // cuDNN only
  TensorDescriptor x_desc_;  // cuDNN only: x, y, dy and dx share it
  DeviceBuffer scratch_;     // kernel only: dy * y / s
};

}  // namespace

bool CudnnSupportsLrn(const LrnParams& p) {
  return 2 * p.depth_radius + 1 <= CUDNN_LRN_MAX_N &&
         p.beta >= CUDNN_LRN_MIN_BETA && p.bias >= CUDNN_LRN_MIN_K;
}

absl::StatusOr<std::unique_ptr<LrnOp>> CreateGpuLrn(const LrnShape& shape,
                                                    GpuContext* context) {
  RETURN_IF_ERROR(shape.Validate());
  auto op = std::make_unique<GpuLrnOp>(shape, context);
  RETURN_IF_ERROR(WithPrefix(op->Init(), shape.ToString() + ": "));
  return std::unique_ptr<LrnOp>(std::move(op));
}

}  // namespace psgd::gpu
