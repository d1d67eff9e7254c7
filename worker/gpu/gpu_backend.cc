// The CUDA backend (gpu_backend.h) and its factory function.
#include "worker/gpu/gpu_backend.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/gpu/cublas_dense.h"
#include "worker/gpu/cudnn_activation.h"
#include "worker/gpu/cudnn_conv.h"
#include "worker/gpu/cudnn_lrn.h"
#include "worker/gpu/device_memory.h"
#include "worker/gpu/elementwise.h"
#include "worker/gpu/gpu_backend_factory.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/kernel_ops.h"

namespace psgd {
namespace {

using gpu::GpuContext;

// This backend's activations are NCHW (ChannelBlock 0): UNIMPLEMENTED for a
// shape in a channel-blocked layout.
absl::Status NchwOnly(const std::string& op, int64_t channel_block) {
  if (channel_block == 0) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat(op,
                   ": the GPU backend keeps activations in NCHW, not in "
                   "channel blocks of ",
                   channel_block));
}

class GpuBackend : public Backend {
 public:
  GpuBackend(std::unique_ptr<GpuContext> context, gpu::CudnnRelu relu,
             gpu::DeviceBuffer decay_scratch, gpu::DeviceBuffer decay_loss)
      : ctx_(std::move(context)),
        relu_(std::move(relu)),
        decay_scratch_(std::move(decay_scratch)),
        decay_loss_(std::move(decay_loss)) {}

  ~GpuBackend() override { (void)ctx_->Synchronize(); }

  std::string name() const override { return ctx_->name(); }
  GpuContext* context() const { return ctx_.get(); }

  absl::Status Synchronize() override {
    RETURN_IF_ERROR(ctx_->Activate());
    return gpu::WithPrefix(ctx_->Synchronize(), name() + " Synchronize: ");
  }

  absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateConv2d(
      const Conv2dShape& shape) override {
    RETURN_IF_ERROR(NchwOnly(shape.ToString(), shape.in_block));
    RETURN_IF_ERROR(NchwOnly(shape.ToString(), shape.out_block));
    return gpu::CreateCudnnConv2d(shape, ctx_.get());
  }

  absl::StatusOr<std::unique_ptr<MaxPoolOp>> CreateMaxPool(
      const PoolShape& shape) override {
    RETURN_IF_ERROR(NchwOnly(shape.ToString(), shape.channel_block));
    return gpu::CreateGpuMaxPool(shape, ctx_.get());
  }

  absl::StatusOr<std::unique_ptr<LrnOp>> CreateLrn(
      const LrnShape& shape) override {
    return gpu::CreateGpuLrn(shape, ctx_.get());
  }

  absl::StatusOr<std::unique_ptr<DenseOp>> CreateDense(
      const DenseShape& shape) override {
    return gpu::CreateCublasDense(shape, ctx_.get());
  }

  absl::StatusOr<std::unique_ptr<SoftmaxCrossEntropyOp>>
  CreateSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape& shape) override {
    return gpu::CreateGpuSoftmaxCrossEntropy(shape, ctx_.get());
  }

  // The layer-graph models' ops (worker/models/network.h) are not on the
  // GPU yet: UNIMPLEMENTED, so that those models refuse to plan here.
  absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateBatchNorm(
      const BatchNormShape& shape) override {
    RETURN_IF_ERROR(NchwOnly(shape.ToString(), shape.channel_block));
    return gpu::CreateGpuBatchNorm(shape, ctx_.get());
  }

  absl::Status Adam(const gpu::AdamParams& params, int64_t step, DeviceView w,
                    ConstDeviceView g, DeviceView m, DeviceView v) {
    RETURN_IF_ERROR(CheckSameShape("adam", w.shape(), g.shape()));
    RETURN_IF_ERROR(CheckSameShape("adam", w.shape(), m.shape()));
    RETURN_IF_ERROR(CheckSameShape("adam", w.shape(), v.shape()));
    if (step < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("adam: step is ", step, ", must be 1 or more"));
    }
    RETURN_IF_ERROR(ctx_->Activate());
    const AdamStep c = gpu::ComputeAdamStepConstants(params, step);
    return gpu::WithPrefix(gpu::LaunchAdam(w.size(), c, w.data(), g.data(),
                                           m.data(), v.data(), ctx_->stream()),
                           "adam: ");
  }

 private:
  absl::StatusOr<DeviceTensor> DoAllocate(const Shape& shape) override {
    RETURN_IF_ERROR(ctx_->Activate());
    const size_t bytes = sizeof(float) * NumElements(shape);
    void* data = nullptr;
    absl::Status s = gpu::DeviceMalloc(&data, bytes);
    if (!s.ok()) {
      return gpu::WithPrefix(
          s, absl::StrCat(name(), ": cannot allocate ", bytes, " bytes for ",
                          ShapeToString(shape), ": "));
    }
    GpuContext* ctx = ctx_.get();
    DeviceTensor tensor(static_cast<float*>(data), shape, [ctx](float* p) {
      (void)ctx->Activate();
      gpu::FreeDeviceMemory(p, ctx->stream());
    });
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(data, 0, bytes, ctx_->stream()));
    return tensor;
  }

  absl::Status DoCopyToDevice(ConstTensorView src, DeviceView dst) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return gpu::WithPrefix(
        ctx_->Upload(src.data(), dst.data(), sizeof(float) * src.size()),
        name() + " CopyToDevice: ");
  }

  absl::Status DoCopyToHost(ConstDeviceView src, TensorView dst) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return gpu::WithPrefix(
        ctx_->Download(src.data(), dst.data(), sizeof(float) * src.size()),
        name() + " CopyToHost: ");
  }

  absl::Status DoAdd(ConstDeviceView a, ConstDeviceView b,
                     DeviceView y) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return gpu::WithPrefix(
        gpu::LaunchAdd(y.size(), a.data(), b.data(), y.data(), ctx_->stream()),
        "add: ");
  }

  absl::Status DoAddRelu(ConstDeviceView a, ConstDeviceView b,
                         DeviceView y) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return gpu::WithPrefix(
        gpu::LaunchAdd(y.size(), a.data(), b.data(), y.data(), ctx_->stream(),
                       /*relu=*/true),
        "add relu: ");
  }

  absl::Status DoCopy(ConstDeviceView src, DeviceView dst) override {
    if (src.data() == dst.data()) return absl::OkStatus();
    RETURN_IF_ERROR(ctx_->Activate());
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst.data(), src.data(), sizeof(float) * src.size(),
                        cudaMemcpyDeviceToDevice, ctx_->stream()));
    return absl::OkStatus();
  }

  absl::Status DoGlobalAvgPoolForward(ConstDeviceView x, int64_t channel_block,
                                      DeviceView y) override {
    RETURN_IF_ERROR(NchwOnly("global average pooling", channel_block));
    RETURN_IF_ERROR(ctx_->Activate());
    return gpu::WithPrefix(
        gpu::LaunchGlobalAvgPool(y.size(), x.dim(2) * x.dim(3), x.data(),
                                 y.data(), ctx_->stream()),
        "global average pooling: ");
  }

  absl::Status DoGlobalAvgPoolBackward(ConstDeviceView dy,
                                       int64_t channel_block,
                                       DeviceView dx) override {
    RETURN_IF_ERROR(NchwOnly("global average pooling", channel_block));
    RETURN_IF_ERROR(ctx_->Activate());
    return gpu::WithPrefix(
        gpu::LaunchGlobalAvgPoolBackward(dy.size(), dx.dim(2) * dx.dim(3),
                                         dy.data(), dx.data(), ctx_->stream()),
        "global average pooling backward: ");
  }

  absl::Status DoReluForward(ConstDeviceView x, DeviceView y) override {
    return gpu::WithPrefix(relu_.Forward(x.size(), x.data(), y.data()),
                           "relu: ");
  }

  absl::Status DoReluBackward(ConstDeviceView y, ConstDeviceView dy,
                              DeviceView dx) override {
    return gpu::WithPrefix(
        relu_.Backward(y.size(), y.data(), dy.data(), dx.data()),
        "relu backward: ");
  }

  absl::StatusOr<double> DoL2WeightDecay(ConstDeviceView w, float decay,
                                         DeviceView dw) override {
    RETURN_IF_ERROR(ctx_->Activate());
    double loss = 0.0;
    RETURN_IF_ERROR(gpu::WithPrefix(
        gpu::LaunchL2WeightDecay(w.size(), w.data(), decay, dw.data(),
                                 decay_scratch_.as<double>(),
                                 decay_loss_.as<double>(), ctx_->stream()),
        "l2 weight decay: "));
    RETURN_IF_ERROR(
        gpu::WithPrefix(ctx_->Download(decay_loss_.data(), &loss, sizeof(loss)),
                        "l2 weight decay: "));
    return loss;
  }

  std::unique_ptr<GpuContext> ctx_;
  gpu::CudnnRelu relu_;
  gpu::DeviceBuffer decay_scratch_;  // kL2WeightDecayScratchElements doubles
  gpu::DeviceBuffer decay_loss_;     // one double
};

const GpuBackend* AsGpu(const Backend& backend) {
  return dynamic_cast<const GpuBackend*>(&backend);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(
    const GpuBackendOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<GpuContext> context,
                   GpuContext::Create(options));
  const std::string prefix = absl::StrCat("backend '", context->name(), "': ");
  ASSIGN_OR_RETURN(
      gpu::CudnnRelu relu,
      gpu::WithPrefix(gpu::CudnnRelu::Create(context.get()), prefix));
  ASSIGN_OR_RETURN(
      gpu::DeviceBuffer decay_scratch,
      gpu::WithPrefix(gpu::DeviceBuffer::Allocate(
                          sizeof(double) * gpu::kL2WeightDecayScratchElements,
                          context->stream()),
                      prefix));
  ASSIGN_OR_RETURN(gpu::DeviceBuffer decay_loss,
                   gpu::WithPrefix(gpu::DeviceBuffer::Allocate(
                                       sizeof(double), context->stream()),
                                   prefix));
  return std::unique_ptr<Backend>(std::make_unique<GpuBackend>(
      std::move(context), std::move(relu), std::move(decay_scratch),
      std::move(decay_loss)));
}

bool IsGpuBackend(const Backend& backend) { return AsGpu(backend) != nullptr; }

absl::Status GpuAdamUpdate(Backend* backend, const gpu::AdamParams& params,
                           int64_t step, DeviceView w, ConstDeviceView g,
                           DeviceView m, DeviceView v) {
  GpuBackend* gpu = dynamic_cast<GpuBackend*>(backend);
  if (gpu == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuAdamUpdate: backend '", backend->name(), "' is not a GPU backend"));
  }
  return gpu->Adam(params, step, w, g, m, v);
}

std::string GpuDescription(const Backend& backend) {
  const GpuBackend* gpu = AsGpu(backend);
  return gpu == nullptr ? std::string() : gpu->context()->description();
}

int64_t GpuBytesToHost(const Backend& backend) {
  const GpuBackend* gpu = AsGpu(backend);
  return gpu == nullptr ? 0 : gpu->context()->bytes_downloaded();
}

int64_t GpuAllocations() { return gpu::Allocations(); }

std::vector<std::string> GpuPlanNotes(const Backend& backend) {
  const GpuBackend* gpu = AsGpu(backend);
  return gpu == nullptr ? std::vector<std::string>()
                        : gpu->context()->plan_notes();
}

}  // namespace psgd
