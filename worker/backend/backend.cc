// The entries of backend.h: each checks its arguments, then runs the
// implementation's Do... call.
#include "worker/backend/backend.h"

#include "common/status_macros.h"

namespace psgd {

absl::Status Conv2dOp::Forward(ConstDeviceView x, ConstDeviceView w,
                               ConstDeviceView b, DeviceView y) {
  RETURN_IF_ERROR(
      shape().CheckForward(x.shape(), w.shape(), b.shape(), y.shape()));
  return DoForward(x, w, b, y);
}

absl::Status Conv2dOp::BackwardData(ConstDeviceView dy, ConstDeviceView w,
                                    DeviceView dx) {
  RETURN_IF_ERROR(shape().CheckBackwardData(dy.shape(), w.shape(), dx.shape()));
  return DoBackwardData(dy, w, dx);
}

absl::Status Conv2dOp::BackwardFilter(ConstDeviceView x, ConstDeviceView dy,
                                      DeviceView dw, DeviceView db) {
  RETURN_IF_ERROR(shape().CheckBackwardFilter(x.shape(), dy.shape(), dw.shape(),
                                              db.shape()));
  return DoBackwardFilter(x, dy, dw, db);
}

absl::Status MaxPoolOp::Forward(ConstDeviceView x, DeviceView y) {
  RETURN_IF_ERROR(shape().CheckForward(x.shape(), y.shape()));
  return DoForward(x, y);
}

absl::Status MaxPoolOp::Backward(ConstDeviceView x, ConstDeviceView y,
                                 ConstDeviceView dy, DeviceView dx) {
  RETURN_IF_ERROR(
      shape().CheckBackward(x.shape(), y.shape(), dy.shape(), dx.shape()));
  return DoBackward(x, y, dy, dx);
}

absl::Status LrnOp::Forward(ConstDeviceView x, DeviceView y) {
  RETURN_IF_ERROR(shape().CheckForward(x.shape(), y.shape()));
  return DoForward(x, y);
}

absl::Status LrnOp::Backward(ConstDeviceView x, ConstDeviceView y,
                             ConstDeviceView dy, DeviceView dx) {
  RETURN_IF_ERROR(
      shape().CheckBackward(x.shape(), y.shape(), dy.shape(), dx.shape()));
  return DoBackward(x, y, dy, dx);
}

absl::Status BatchNormOp::ForwardTraining(
    ConstDeviceView x, ConstDeviceView gamma, ConstDeviceView beta,
    DeviceView y, DeviceView batch_mean, DeviceView batch_var,
    DeviceView running_mean, DeviceView running_var) {
  RETURN_IF_ERROR(shape().CheckForwardTraining(
      x.shape(), gamma.shape(), beta.shape(), y.shape(), batch_mean.shape(),
      batch_var.shape(), running_mean.shape(), running_var.shape()));
  return DoForwardTraining(x, gamma, beta, y, batch_mean, batch_var,
                           running_mean, running_var);
}

absl::Status BatchNormOp::ForwardInference(
    ConstDeviceView x, ConstDeviceView gamma, ConstDeviceView beta,
    ConstDeviceView running_mean, ConstDeviceView running_var, DeviceView y) {
  RETURN_IF_ERROR(shape().CheckForwardInference(
      x.shape(), gamma.shape(), beta.shape(), running_mean.shape(),
      running_var.shape(), y.shape()));
  return DoForwardInference(x, gamma, beta, running_mean, running_var, y);
}

absl::Status BatchNormOp::Backward(ConstDeviceView x, ConstDeviceView y,
                                   ConstDeviceView dy, ConstDeviceView gamma,
                                   ConstDeviceView batch_mean,
                                   ConstDeviceView batch_var, DeviceView dx,
                                   DeviceView dgamma, DeviceView dbeta) {
  RETURN_IF_ERROR(shape().CheckBackward(
      x.shape(), y.shape(), dy.shape(), gamma.shape(), batch_mean.shape(),
      batch_var.shape(), dx.shape(), dgamma.shape(), dbeta.shape()));
  return DoBackward(x, y, dy, gamma, batch_mean, batch_var, dx, dgamma, dbeta);
}

absl::Status DenseOp::Forward(ConstDeviceView x, ConstDeviceView w,
                              ConstDeviceView b, DeviceView y) {
  RETURN_IF_ERROR(
      shape().CheckForward(x.shape(), w.shape(), b.shape(), y.shape()));
  return DoForward(x, w, b, y);
}

absl::Status DenseOp::BackwardData(ConstDeviceView dy, ConstDeviceView w,
                                   DeviceView dx) {
  RETURN_IF_ERROR(shape().CheckBackwardData(dy.shape(), w.shape(), dx.shape()));
  return DoBackwardData(dy, w, dx);
}

absl::Status DenseOp::BackwardWeights(ConstDeviceView x, ConstDeviceView dy,
                                      DeviceView dw, DeviceView db) {
  RETURN_IF_ERROR(shape().CheckBackwardWeights(x.shape(), dy.shape(),
                                               dw.shape(), db.shape()));
  return DoBackwardWeights(x, dy, dw, db);
}

absl::StatusOr<CrossEntropyResult> SoftmaxCrossEntropyOp::Run(
    ConstDeviceView logits, absl::Span<const int32_t> labels,
    DeviceView dlogits) {
  RETURN_IF_ERROR(shape().CheckRun(logits.shape(), dlogits.shape()));
  RETURN_IF_ERROR(shape().CheckLabels(labels));
  return DoRun(logits, labels, dlogits);
}

absl::StatusOr<DeviceTensor> Backend::Allocate(const Shape& shape) {
  RETURN_IF_ERROR(ValidateShape(shape));
  return DoAllocate(shape);
}

absl::Status Backend::CopyToDevice(ConstTensorView src, DeviceView dst) {
  RETURN_IF_ERROR(CheckSameCount("CopyToDevice", src.size(), dst.size()));
  return DoCopyToDevice(src, dst);
}

absl::Status Backend::CopyToHost(ConstDeviceView src, TensorView dst) {
  RETURN_IF_ERROR(CheckSameCount("CopyToHost", src.size(), dst.size()));
  return DoCopyToHost(src, dst);
}

absl::Status Backend::ReluForward(ConstDeviceView x, DeviceView y) {
  RETURN_IF_ERROR(CheckSameShape("relu", x.shape(), y.shape()));
  return DoReluForward(x, y);
}

absl::Status Backend::ReluBackward(ConstDeviceView y, ConstDeviceView dy,
                                   DeviceView dx) {
  RETURN_IF_ERROR(CheckSameShape("relu backward", y.shape(), dy.shape()));
  RETURN_IF_ERROR(CheckSameShape("relu backward", y.shape(), dx.shape()));
  return DoReluBackward(y, dy, dx);
}

absl::Status Backend::Add(ConstDeviceView a, ConstDeviceView b, DeviceView y) {
  RETURN_IF_ERROR(CheckSameShape("add", a.shape(), b.shape()));
  RETURN_IF_ERROR(CheckSameShape("add", a.shape(), y.shape()));
  return DoAdd(a, b, y);
}

absl::Status Backend::AddRelu(ConstDeviceView a, ConstDeviceView b,
                              DeviceView y) {
  RETURN_IF_ERROR(CheckSameShape("add relu", a.shape(), b.shape()));
  RETURN_IF_ERROR(CheckSameShape("add relu", a.shape(), y.shape()));
  return DoAddRelu(a, b, y);
}

absl::Status Backend::Copy(ConstDeviceView src, DeviceView dst) {
  RETURN_IF_ERROR(CheckSameCount("copy", src.size(), dst.size()));
  return DoCopy(src, dst);
}

absl::Status Backend::GlobalAvgPoolForward(ConstDeviceView x,
                                           int64_t channel_block,
                                           DeviceView y) {
  RETURN_IF_ERROR(CheckGlobalAvgPool(x.shape(), y.shape(), channel_block));
  return DoGlobalAvgPoolForward(x, channel_block, y);
}

absl::Status Backend::GlobalAvgPoolBackward(ConstDeviceView dy,
                                            int64_t channel_block,
                                            DeviceView dx) {
  RETURN_IF_ERROR(CheckGlobalAvgPool(dx.shape(), dy.shape(), channel_block));
  return DoGlobalAvgPoolBackward(dy, channel_block, dx);
}

absl::StatusOr<double> Backend::L2WeightDecay(ConstDeviceView w, float decay,
                                              DeviceView dw) {
  RETURN_IF_ERROR(CheckSameShape("l2 weight decay", w.shape(), dw.shape()));
  return DoL2WeightDecay(w, decay, dw);
}

}  // namespace psgd
