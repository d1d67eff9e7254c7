// The cifar10 tutorial network's arithmetic for one batch size on a
// backend: its ops, its activation buffers, and forward, loss, backward and
// weight decay over weights and gradients that the caller keeps in backend
// memory. Shared by the model (worker/models/cifar10_tutorial.cc, weights
// uploaded per call) and the device-resident trainer
// (worker/train/tutorial_trainer.h, weights in one flat buffer), so that the
// layer wiring is written once.
//
// Thread-safety: one thread at a time (as the backend). Must not outlive its
// backend.
#ifndef PSGD_WORKER_MODELS_CIFAR10_TUTORIAL_NET_H_
#define PSGD_WORKER_MODELS_CIFAR10_TUTORIAL_NET_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model_variables.h"
#include "worker/backend/backend.h"
#include "worker/models/model.h"

namespace psgd {

class Cifar10TutorialNet {
 public:
  // Positions in Cifar10TutorialVariables().
  enum Var {
    kConv1W,
    kConv1B,
    kConv2W,
    kConv2B,
    kLocal3W,
    kLocal3B,
    kLocal4W,
    kLocal4B,
    kSoftmaxW,
    kSoftmaxB,
    kNumVars
  };
  static constexpr int64_t kChannels = 3, kSize = 24, kClasses = 10;

  using Weights = std::array<ConstDeviceView, kNumVars>;
  using Gradients = std::array<DeviceView, kNumVars>;

  // INTERNAL, naming `who`, when `specs` is not the variable list in the
  // order of Var.
  static absl::Status CheckVariables(const std::vector<VariableSpec>& specs,
                                     absl::string_view who);

  // The ops and buffers for batches of `batch` images.
  static absl::StatusOr<std::unique_ptr<Cifar10TutorialNet>> Create(
      Backend* backend, int64_t batch);
  ~Cifar10TutorialNet();

  int64_t batch() const { return batch_; }
  // A buffer of shape (batch, 3, 24, 24) for images copied in from the host.
  DeviceView images() { return x_.view(); }
  ConstDeviceView logits() const { return logits_.view(); }

  // Overlap: called with a layer's weight variable (its bias is the next
  // one), before the forward reads the layer's variables or after the
  // backward has written their gradients; an error ends the pass.
  using LayerHook = std::function<absl::Status(Var weight)>;

  // Logits of `images` (batch, 3, 24, 24); `before` (when set) runs before
  // each layer, first to last.
  absl::Status Forward(ConstDeviceView images, const Weights& w,
                       const LayerHook& before = nullptr);
  // After Forward: mean cross-entropy and accuracy (validates the labels);
  // keeps the gradient of the logits for Backward.
  absl::StatusOr<StepResult> Loss(absl::Span<const int32_t> labels);
  // After Loss: the gradients of the mean cross-entropy into `g`;
  // `after` (when set) runs once each layer's gradients are written, last
  // layer first.
  absl::Status Backward(ConstDeviceView images, const Weights& w,
                        const Gradients& g, const LayerHook& after = nullptr);
  // Adds the gradient of the L2 weight decay (0.004 on local3 and local4's
  // weights) to `g`; returns the decay's value.
  absl::StatusOr<double> WeightDecay(const Weights& w, const Gradients& g);
  // The decay of variable v alone: 0 for the variables without decay.
  absl::StatusOr<double> WeightDecayOf(Var v, const Weights& w,
                                       const Gradients& g);

 private:
  explicit Cifar10TutorialNet(Backend* backend, int64_t batch)
      : backend_(backend), batch_(batch) {}
  ConstDeviceView Flat(const DeviceTensor& pooled) const;

  Backend* const backend_;  // Not owned.
  const int64_t batch_;
  std::unique_ptr<Conv2dOp> conv1_, conv2_;
  std::unique_ptr<MaxPoolOp> pool1_, pool2_;
  std::unique_ptr<LrnOp> norm1_, norm2_;
  std::unique_ptr<DenseOp> local3_, local4_, softmax_;
  std::unique_ptr<SoftmaxCrossEntropyOp> xent_;
  DeviceTensor x_;  // for host images
  // Forward activations (after the in-place ReLUs where there is one).
  DeviceTensor a1_, p1_, n1_, a2_, n2_, p2_, h3_, h4_, logits_;
  // Gradients of the activations.
  DeviceTensor d_logits_, d_h4_, d_h3_, d_p2_, d_n2_, d_a2_, d_n1_, d_p1_,
      d_a1_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_CIFAR10_TUTORIAL_NET_H_
