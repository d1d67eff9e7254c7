// The worker's arithmetic, behind one interface: a CPU implementation
// (worker/cpu, oneDNN) and a CUDA one (worker/gpu, cuDNN and cuBLAS), picked
// by worker/backend_factory/factory.h. Models are written once against it.
//
// Memory. Tensors live in memory the backend owns (Backend::Allocate returns
// a DeviceTensor); host data moves in and out only through CopyToDevice and
// CopyToHost. Ops take views into that memory.
//
// Plans. Every op whose implementation keeps per-shape state (a convolution
// algorithm, a workspace, reordered weights, library descriptors) is created
// once for a shape as an op object (Conv2dOp, MaxPoolOp, LrnOp, DenseOp,
// SoftmaxCrossEntropyOp) and then run many times on views of exactly that
// shape; a view of another shape is INVALID_ARGUMENT. Element-wise ops with
// no state are methods of Backend.
//
// Checks. Every call is a non-virtual entry that checks its arguments'
// shapes (the op's against its shape(), op_shapes.h; the element-wise ones
// against each other) and only then calls the implementation's private
// virtual Do... of the same arguments: an implementation never sees a view
// of the wrong shape and does not check again. A refused call runs nothing.
//
// Ordering. A backend may run ops asynchronously, in issue order (the CUDA
// backend: one stream). Results are ready for the host after CopyToHost
// returns, after Synchronize, or when an op returns a host value (the loss).
// An op's output view must not overlap its inputs unless the op says so.
//
// Errors. Every call returns absl::Status: INVALID_ARGUMENT for shapes that
// do not match the plan, RESOURCE_EXHAUSTED when memory runs out, INTERNAL for
// a failure inside the library.
//
// Thread-safety: a Backend and the ops it creates are used by one thread at a
// time (the CUDA backend has one stream). Ops must not outlive their backend.
#ifndef PSGD_WORKER_BACKEND_BACKEND_H_
#define PSGD_WORKER_BACKEND_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "worker/backend/device_tensor.h"
#include "worker/backend/op_shapes.h"

namespace psgd {

// Convolution: stride 1, SAME padding and a bias by default, or the stride,
// padding and bias the shape says. See Conv2dShape.
class Conv2dOp {
 public:
  virtual ~Conv2dOp() = default;
  virtual const Conv2dShape& shape() const = 0;

  // x: (N, C, H, W); w: (O, C, KH, KW); b: (O) or [] without a bias  ->
  // y: (N, O, OH, OW)
  absl::Status Forward(ConstDeviceView x, ConstDeviceView w, ConstDeviceView b,
                       DeviceView y);
  // dy: (N, O, H, W); w: (O, C, KH, KW)  ->  dx: (N, C, H, W)
  absl::Status BackwardData(ConstDeviceView dy, ConstDeviceView w,
                            DeviceView dx);
  // x: (N, C, H, W); dy: (N, O, H, W)  ->  dw: (O, C, KH, KW), db: (O).
  // Overwrites dw and db.
  absl::Status BackwardFilter(ConstDeviceView x, ConstDeviceView dy,
                              DeviceView dw, DeviceView db);

 private:
  // The calls above, their arguments' shapes checked.
  virtual absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                                 ConstDeviceView b, DeviceView y) = 0;
  virtual absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                                      DeviceView dx) = 0;
  virtual absl::Status DoBackwardFilter(ConstDeviceView x, ConstDeviceView dy,
                                        DeviceView dw, DeviceView db) = 0;
};

// Max pooling, SAME padding. See PoolShape.
class MaxPoolOp {
 public:
  virtual ~MaxPoolOp() = default;
  virtual const PoolShape& shape() const = 0;

  // x: (N, C, H, W)  ->  y: (N, C, OH, OW)
  absl::Status Forward(ConstDeviceView x, DeviceView y);
  // x: (N, C, H, W); y, dy: (N, C, OH, OW)  ->  dx: (N, C, H, W). Each
  // output's gradient goes to the first maximum of its window (row-major).
  absl::Status Backward(ConstDeviceView x, ConstDeviceView y,
                        ConstDeviceView dy, DeviceView dx);

 private:
  // The calls above, their arguments' shapes checked.
  virtual absl::Status DoForward(ConstDeviceView x, DeviceView y) = 0;
  virtual absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                                  ConstDeviceView dy, DeviceView dx) = 0;
};

// Local response normalisation across channels. See LrnParams.
class LrnOp {
 public:
  virtual ~LrnOp() = default;
  virtual const LrnShape& shape() const = 0;

  // x: (N, C, H, W)  ->  y: (N, C, H, W)
  absl::Status Forward(ConstDeviceView x, DeviceView y);
  // x, y, dy: (N, C, H, W)  ->  dx: (N, C, H, W)
  absl::Status Backward(ConstDeviceView x, ConstDeviceView y,
                        ConstDeviceView dy, DeviceView dx);

 private:
  // The calls above, their arguments' shapes checked.
  virtual absl::Status DoForward(ConstDeviceView x, DeviceView y) = 0;
  virtual absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                                  ConstDeviceView dy, DeviceView dx) = 0;
};

// Batch normalisation (optionally fused with a ReLU). See BatchNormShape.
// The op keeps no state between calls: running statistics and the batch
// statistics that Backward needs are the caller's tensors.
class BatchNormOp {
 public:
  virtual ~BatchNormOp() = default;
  virtual const BatchNormShape& shape() const = 0;

  // Training. x: (N, C, H, W); gamma, beta: (C)  ->  y: (N, C, H, W);
  // batch_mean, batch_var: (C), the batch's mean and biased variance (for
  // Backward); running_mean, running_var: (C), updated in place.
  absl::Status ForwardTraining(ConstDeviceView x, ConstDeviceView gamma,
                               ConstDeviceView beta, DeviceView y,
                               DeviceView batch_mean, DeviceView batch_var,
                               DeviceView running_mean, DeviceView running_var);
  // Inference. x: (N, C, H, W); gamma, beta, running_mean, running_var: (C)
  // ->  y: (N, C, H, W).
  absl::Status ForwardInference(ConstDeviceView x, ConstDeviceView gamma,
                                ConstDeviceView beta,
                                ConstDeviceView running_mean,
                                ConstDeviceView running_var, DeviceView y);
  // Backward of ForwardTraining. x, y, dy: (N, C, H, W) (y: the forward's
  // output, whose zeros are the fused ReLU's mask; unread without relu);
  // gamma, batch_mean, batch_var: (C)  ->  dx: (N, C, H, W); dgamma, dbeta:
  // (C), overwritten. dx may be dy (in place).
  absl::Status Backward(ConstDeviceView x, ConstDeviceView y,
                        ConstDeviceView dy, ConstDeviceView gamma,
                        ConstDeviceView batch_mean, ConstDeviceView batch_var,
                        DeviceView dx, DeviceView dgamma, DeviceView dbeta);

 private:
  // The calls above, their arguments' shapes checked.
  virtual absl::Status DoForwardTraining(
      ConstDeviceView x, ConstDeviceView gamma, ConstDeviceView beta,
      DeviceView y, DeviceView batch_mean, DeviceView batch_var,
      DeviceView running_mean, DeviceView running_var) = 0;
  virtual absl::Status DoForwardInference(ConstDeviceView x,
                                          ConstDeviceView gamma,
                                          ConstDeviceView beta,
                                          ConstDeviceView running_mean,
                                          ConstDeviceView running_var,
                                          DeviceView y) = 0;
  virtual absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                                  ConstDeviceView dy, ConstDeviceView gamma,
                                  ConstDeviceView batch_mean,
                                  ConstDeviceView batch_var, DeviceView dx,
                                  DeviceView dgamma, DeviceView dbeta) = 0;
};

// Fully connected layer with bias. See DenseShape.
class DenseOp {
 public:
  virtual ~DenseOp() = default;
  virtual const DenseShape& shape() const = 0;

  // x: (N, K); w: (K, M); b: (M)  ->  y: (N, M)
  absl::Status Forward(ConstDeviceView x, ConstDeviceView w, ConstDeviceView b,
                       DeviceView y);
  // dy: (N, M); w: (K, M)  ->  dx: (N, K)
  absl::Status BackwardData(ConstDeviceView dy, ConstDeviceView w,
                            DeviceView dx);
  // x: (N, K); dy: (N, M)  ->  dw: (K, M), db: (M). Overwrites dw and db.
  absl::Status BackwardWeights(ConstDeviceView x, ConstDeviceView dy,
                               DeviceView dw, DeviceView db);

 private:
  // The calls above, their arguments' shapes checked.
  virtual absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                                 ConstDeviceView b, DeviceView y) = 0;
  virtual absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                                      DeviceView dx) = 0;
  virtual absl::Status DoBackwardWeights(ConstDeviceView x, ConstDeviceView dy,
                                         DeviceView dw, DeviceView db) = 0;
};

// What SoftmaxCrossEntropyOp returns to the host.
struct CrossEntropyResult {
  double loss = 0.0;    // mean over the batch of -log softmax(logits)[label]
  int64_t correct = 0;  // examples whose label's logit is the largest (ties
                        // count as correct, as tf.nn.in_top_k with k = 1)
};

// Softmax cross-entropy averaged over the batch, forward and backward in one
// call (as TensorFlow's SparseSoftmaxCrossEntropyWithLogits).
class SoftmaxCrossEntropyOp {
 public:
  virtual ~SoftmaxCrossEntropyOp() = default;
  virtual const SoftmaxCrossEntropyShape& shape() const = 0;

  // logits: (N, K); labels: N host values in [0, K)  ->  dlogits: (N, K) =
  // (softmax(logits) - one_hot(labels)) / N, and the loss and the number of
  // correct predictions. INVALID_ARGUMENT for another number of labels or a
  // label outside [0, K) too.
  absl::StatusOr<CrossEntropyResult> Run(ConstDeviceView logits,
                                         absl::Span<const int32_t> labels,
                                         DeviceView dlogits);

 private:
  // Run, its arguments' shapes and its labels checked.
  virtual absl::StatusOr<CrossEntropyResult> DoRun(
      ConstDeviceView logits, absl::Span<const int32_t> labels,
      DeviceView dlogits) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "gpu:0", ...
  virtual std::string name() const = 0;

  // --- Memory -------------------------------------------------------------
  // A zero-filled tensor. INVALID_ARGUMENT for an invalid shape
  // (ValidateShape), RESOURCE_EXHAUSTED when out of memory.
  absl::StatusOr<DeviceTensor> Allocate(const Shape& shape);
  // Element counts must match (shapes may differ); INVALID_ARGUMENT if not.
  absl::Status CopyToDevice(ConstTensorView src, DeviceView dst);
  // Waits for the ops that write `src`.
  absl::Status CopyToHost(ConstDeviceView src, TensorView dst);
  // Waits until every op issued so far has finished.
  virtual absl::Status Synchronize() = 0;
  // Bytes the backend holds for its ops' calls beyond the tensors it
  // allocated: the CPU backend's workspace, which its ops share and which is
  // as large as the largest call of the ops made so far (worker/cpu/
  // onednn_util.h). 0 where there is none.
  virtual int64_t WorkspaceBytes() const { return 0; }
  // The channel block of the activation layout this backend's convolutions,
  // batch norms and pools run fastest on (op_shapes.h,
  // ValidateChannelBlock): a network keeps its activations in it from the
  // first convolution to the pooling before the classifier wherever the
  // channels divide by it. 0: NCHW only (the ops refuse other blocks).
  virtual int64_t ChannelBlock() const { return 0; }

  // --- Plans --------------------------------------------------------------
  // INVALID_ARGUMENT for an invalid shape.
  virtual absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateConv2d(
      const Conv2dShape& shape) = 0;
  virtual absl::StatusOr<std::unique_ptr<MaxPoolOp>> CreateMaxPool(
      const PoolShape& shape) = 0;
  virtual absl::StatusOr<std::unique_ptr<LrnOp>> CreateLrn(
      const LrnShape& shape) = 0;
  virtual absl::StatusOr<std::unique_ptr<DenseOp>> CreateDense(
      const DenseShape& shape) = 0;
  virtual absl::StatusOr<std::unique_ptr<SoftmaxCrossEntropyOp>>
  CreateSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape& shape) = 0;
  virtual absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateBatchNorm(
      const BatchNormShape& shape) = 0;

  // --- Element-wise ops (any shape; x and y of equal shape) ---------------
  // INVALID_ARGUMENT "<op>: shapes [..] and [..] differ" (CheckSameShape)
  // unless they are.
  // y = max(x, 0). y may be x (in place).
  absl::Status ReluForward(ConstDeviceView x, DeviceView y);
  // dx = dy where y > 0, else 0. dx may be dy (in place).
  absl::Status ReluBackward(ConstDeviceView y, ConstDeviceView dy,
                            DeviceView dx);
  // y = a + b (the residual add; also sums gradients). y may be a or b.
  absl::Status Add(ConstDeviceView a, ConstDeviceView b, DeviceView y);
  // y = max(a + b, 0): the residual add and the ReLU after it in one pass
  // (ReluBackward then takes this y as its mask). y may be a or b.
  absl::Status AddRelu(ConstDeviceView a, ConstDeviceView b, DeviceView y);
  // dst = src; element counts must match.
  absl::Status Copy(ConstDeviceView src, DeviceView dst);
  // Global average pooling. x: (N, C, H, W) in the layout of
  // `channel_block` (op_shapes.h)  ->  y: (N, C), the mean over H and W.
  absl::Status GlobalAvgPoolForward(ConstDeviceView x, int64_t channel_block,
                                    DeviceView y);
  // dy: (N, C)  ->  dx: (N, C, H, W) = dy / (H * W) at every position, in
  // the layout of `channel_block`.
  absl::Status GlobalAvgPoolBackward(ConstDeviceView dy, int64_t channel_block,
                                     DeviceView dx);
  // L2 weight decay of one variable, TensorFlow's
  // decay * tf.nn.l2_loss(w) = decay * sum(w^2) / 2:
  // dw += decay * w, and returns that loss term.
  absl::StatusOr<double> L2WeightDecay(ConstDeviceView w, float decay,
                                       DeviceView dw);

 private:
  // The calls above of the same names, their arguments checked (shapes,
  // element counts, the channel block).
  virtual absl::StatusOr<DeviceTensor> DoAllocate(const Shape& shape) = 0;
  virtual absl::Status DoCopyToDevice(ConstTensorView src, DeviceView dst) = 0;
  virtual absl::Status DoCopyToHost(ConstDeviceView src, TensorView dst) = 0;
  virtual absl::Status DoReluForward(ConstDeviceView x, DeviceView y) = 0;
  virtual absl::Status DoReluBackward(ConstDeviceView y, ConstDeviceView dy,
                                      DeviceView dx) = 0;
  virtual absl::Status DoAdd(ConstDeviceView a, ConstDeviceView b,
                             DeviceView y) = 0;
  virtual absl::Status DoAddRelu(ConstDeviceView a, ConstDeviceView b,
                                 DeviceView y) = 0;
  virtual absl::Status DoCopy(ConstDeviceView src, DeviceView dst) = 0;
  virtual absl::Status DoGlobalAvgPoolForward(ConstDeviceView x,
                                              int64_t channel_block,
                                              DeviceView y) = 0;
  virtual absl::Status DoGlobalAvgPoolBackward(ConstDeviceView dy,
                                               int64_t channel_block,
                                               DeviceView dx) = 0;
  virtual absl::StatusOr<double> DoL2WeightDecay(ConstDeviceView w, float decay,
                                                 DeviceView dw) = 0;
};

}  // namespace psgd

#endif  // PSGD_WORKER_BACKEND_BACKEND_H_
