#include "worker/gpu/kernel_ops.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/gpu/batch_norm.h"
#include "worker/gpu/pooling.h"
#include "worker/gpu/softmax_xent.h"

namespace psgd::gpu {
namespace {

class GpuMaxPool : public MaxPoolOp {
 public:
  GpuMaxPool(const PoolShape& shape, GpuContext* context)
      : shape_(shape), name_(shape.ToString()), ctx_(context) {
    const SamePadding ph =
        ComputeSamePadding(shape.height, shape.window, shape.stride);
    const SamePadding pw =
        ComputeSamePadding(shape.width, shape.window, shape.stride);
    geometry_.planes = shape.batch * shape.channels;
    geometry_.height = shape.height;
    geometry_.width = shape.width;
    geometry_.out_height = ph.output;
    geometry_.out_width = pw.output;
    geometry_.window = shape.window;
    geometry_.stride = shape.stride;
    geometry_.pad_top = ph.before;
    geometry_.pad_left = pw.before;
  }

  const PoolShape& shape() const override { return shape_; }

 private:
  // x: (N, C, H, W) -> y: (N, C, OH, OW)
  absl::Status DoForward(ConstDeviceView x, DeviceView y) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return WithPrefix(
        LaunchMaxPoolForward(geometry_, x.data(), y.data(), ctx_->stream()),
        name_ + " forward: ");
  }

  // x: (N, C, H, W); y, dy: (N, C, OH, OW) -> dx: (N, C, H, W)
  absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                          ConstDeviceView dy, DeviceView dx) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return WithPrefix(LaunchMaxPoolBackward(geometry_, x.data(), dy.data(),
                                            dx.data(), ctx_->stream()),
                      name_ + " backward: ");
  }

  const PoolShape shape_;
  const std::string name_;
  GpuContext* const ctx_;  // Not owned.
  PoolGeometry geometry_;
};

class GpuSoftmaxCrossEntropy : public SoftmaxCrossEntropyOp {
 public:
  GpuSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape& shape,
                         GpuContext* context)
      : shape_(shape), name_(shape.ToString()), ctx_(context) {}

  absl::Status Init() {
    RETURN_IF_ERROR(ctx_->Activate());
    cudaStream_t stream = ctx_->stream();
    const size_t n = static_cast<size_t>(shape_.batch);
    ASSIGN_OR_RETURN(labels_,
                     DeviceBuffer::Allocate(n * sizeof(int32_t), stream));
    ASSIGN_OR_RETURN(row_loss_,
                     DeviceBuffer::Allocate(n * sizeof(double), stream));
    ASSIGN_OR_RETURN(row_correct_,
                     DeviceBuffer::Allocate(n * sizeof(int), stream));
    ASSIGN_OR_RETURN(
        totals_, DeviceBuffer::Allocate(sizeof(CrossEntropyTotals), stream));
    return absl::OkStatus();
  }

  const SoftmaxCrossEntropyShape& shape() const override { return shape_; }

 private:
  // logits: (N, K); labels: N host values -> dlogits: (N, K)
  absl::StatusOr<CrossEntropyResult> DoRun(ConstDeviceView logits,
                                           absl::Span<const int32_t> labels,
                                           DeviceView dlogits) override {
    CrossEntropyTotals totals{};
    RETURN_IF_ERROR(
        WithPrefix(RunKernels(logits.data(), labels, dlogits.data(), &totals),
                   name_ + ": "));
    CrossEntropyResult result;
    result.loss = totals.loss_sum / static_cast<double>(shape_.batch);
    result.correct = totals.correct;
    return result;
  }

  absl::Status RunKernels(const float* logits, absl::Span<const int32_t> labels,
                          float* dlogits, CrossEntropyTotals* totals) {
    RETURN_IF_ERROR(ctx_->Activate());
    RETURN_IF_ERROR(ctx_->Upload(labels.data(), labels_.data(),
                                 labels.size() * sizeof(int32_t)));
    RETURN_IF_ERROR(LaunchSoftmaxCrossEntropy(
        shape_.batch, shape_.classes, logits, labels_.as<int32_t>(), dlogits,
        row_loss_.as<double>(), row_correct_.as<int>(), ctx_->stream()));
    RETURN_IF_ERROR(LaunchCrossEntropyTotals(
        shape_.batch, row_loss_.as<double>(), row_correct_.as<int>(),
        totals_.as<CrossEntropyTotals>(), ctx_->stream()));
    return ctx_->Download(totals_.data(), totals, sizeof(*totals));
  }

  const SoftmaxCrossEntropyShape shape_;
  const std::string name_;
  GpuContext* const ctx_;     // Not owned.
  DeviceBuffer labels_;       // (N) int32
  DeviceBuffer row_loss_;     // (N) double
  DeviceBuffer row_correct_;  // (N) int
  DeviceBuffer totals_;       // one CrossEntropyTotals
};

class GpuBatchNorm : public BatchNormOp {
 public:
  GpuBatchNorm(const BatchNormShape& shape, GpuContext* context)
      : shape_(shape), name_(shape.ToString()), ctx_(context) {
    geometry_.batch = shape.batch;
    geometry_.channels = shape.channels;
    geometry_.plane = shape.height * shape.width;
    geometry_.epsilon = shape.epsilon;
    geometry_.relu = shape.relu;
  }

  const BatchNormShape& shape() const override { return shape_; }

 private:
  absl::Status DoForwardTraining(ConstDeviceView x, ConstDeviceView gamma,
                                 ConstDeviceView beta, DeviceView y,
                                 DeviceView batch_mean, DeviceView batch_var,
                                 DeviceView running_mean,
                                 DeviceView running_var) override {
    RETURN_IF_ERROR(ctx_->Activate());
    RETURN_IF_ERROR(WithPrefix(
        LaunchBatchNormStatistics(geometry_, x.data(), shape_.momentum,
                                  batch_mean.data(), batch_var.data(),
                                  running_mean.data(), running_var.data(),
                                  ctx_->stream()),
        name_ + " statistics: "));
    return WithPrefix(
        LaunchBatchNormForward(geometry_, x.data(), gamma.data(), beta.data(),
                               batch_mean.data(), batch_var.data(), y.data(),
                               ctx_->stream()),
        name_ + " forward: ");
  }

  absl::Status DoForwardInference(ConstDeviceView x, ConstDeviceView gamma,
                                  ConstDeviceView beta,
                                  ConstDeviceView running_mean,
                                  ConstDeviceView running_var,
                                  DeviceView y) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return WithPrefix(
        LaunchBatchNormForward(geometry_, x.data(), gamma.data(), beta.data(),
                               running_mean.data(), running_var.data(),
                               y.data(), ctx_->stream()),
        name_ + " inference: ");
  }

  absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                          ConstDeviceView dy, ConstDeviceView gamma,
                          ConstDeviceView batch_mean, ConstDeviceView batch_var,
                          DeviceView dx, DeviceView dgamma,
                          DeviceView dbeta) override {
    RETURN_IF_ERROR(ctx_->Activate());
    return WithPrefix(
        LaunchBatchNormBackward(geometry_, x.data(), y.data(), dy.data(),
                                gamma.data(), batch_mean.data(),
                                batch_var.data(), dx.data(), dgamma.data(),
                                dbeta.data(), ctx_->stream()),
        name_ + " backward: ");
  }

  const BatchNormShape shape_;
  const std::string name_;
  GpuContext* const ctx_;  // Not owned.
  BatchNormGeometry geometry_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateGpuBatchNorm(
    const BatchNormShape& shape, GpuContext* context) {
  RETURN_IF_ERROR(shape.Validate());
  return std::unique_ptr<BatchNormOp>(
      std::make_unique<GpuBatchNorm>(shape, context));
}

absl::StatusOr<std::unique_ptr<MaxPoolOp>> CreateGpuMaxPool(
    const PoolShape& shape, GpuContext* context) {
  RETURN_IF_ERROR(shape.Validate());
  return std::unique_ptr<MaxPoolOp>(
      std::make_unique<GpuMaxPool>(shape, context));
}

absl::StatusOr<std::unique_ptr<SoftmaxCrossEntropyOp>>
CreateGpuSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape& shape,
                             GpuContext* context) {
  RETURN_IF_ERROR(shape.Validate());
  auto op = std::make_unique<GpuSoftmaxCrossEntropy>(shape, context);
  RETURN_IF_ERROR(WithPrefix(op->Init(), shape.ToString() + ": "));
  return std::unique_ptr<SoftmaxCrossEntropyOp>(std::move(op));
}

}  // namespace psgd::gpu
