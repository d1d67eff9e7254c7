// The cifar10 tutorial network (worker/models/cifar10_tutorial.h) for one
// batch size, with its weights and gradients resident in backend memory, so
// that a training step moves no weights between host and device: the shape
// of step gpu_bench times, and of a GPU worker that keeps its replica on the
// device.
//
// Model::ComputeGradients takes host weights and returns host gradients
// (what the parameter-server worker needs); this class keeps them on the
// backend. Both run the same network code
// (worker/models/cifar10_tutorial_net.h); tutorial_trainer_test checks that
// both give the same gradients.
//
// Layout: every weight (and every gradient) lives in one flat buffer, the
// variables in their list order, each starting at a multiple of 64 floats,
// so that an optimizer updates all of them in one call (padding entries stay
// zero).
//
// Thread-safety: one thread at a time (as the backend). Must not outlive its
// backend.
#ifndef PSGD_WORKER_TRAIN_TUTORIAL_TRAINER_H_
#define PSGD_WORKER_TRAIN_TUTORIAL_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_variables.h"
#include "worker/backend/backend.h"
#include "worker/models/cifar10_tutorial_net.h"
#include "worker/models/model.h"

namespace psgd {

class TutorialTrainer {
 public:
  // Plans and buffers for batches of `batch` images on `backend` (not
  // owned). Weights start at zero. INVALID_ARGUMENT for batch < 1.
  static absl::StatusOr<std::unique_ptr<TutorialTrainer>> Create(
      Backend* backend, int64_t batch);
  ~TutorialTrainer();

  const std::vector<VariableSpec>& variables() const { return specs_; }
  int64_t batch() const;
  // Elements of the flat buffers (the variables plus padding).
  int64_t flat_size() const { return flat_size_; }

  // Copies host weights in. INVALID_ARGUMENT naming a missing, unknown or
  // misshapen variable (nothing is copied then).
  absl::Status SetWeights(const NamedConstViews& weights);
  // Copies the weights / the last step's gradients out, one tensor per
  // variable (reusing tensors of the right shape).
  absl::Status GetWeights(NamedTensors* out);
  absl::Status GetGradients(NamedTensors* out);

  // The flat buffers (see Layout above). An optimizer updates weights() from
  // gradients() in place.
  DeviceView weights();
  ConstDeviceView gradients() const;

  // One step without the optimizer: forward, loss, backward and weight
  // decay, leaving the gradient of loss = mean cross-entropy + weight decay
  // in gradients(). images: (batch, 3, 24, 24) in backend memory; labels:
  // batch values in [0, 10). INVALID_ARGUMENT for a wrong shape or label.
  absl::StatusOr<StepResult> ComputeGradients(ConstDeviceView images,
                                              absl::Span<const int32_t> labels);
  // The same with host images (copied in first).
  absl::StatusOr<StepResult> ComputeGradients(ConstTensorView images,
                                              absl::Span<const int32_t> labels);

 private:
  TutorialTrainer(Backend* backend, std::vector<VariableSpec> specs);

  Backend* const backend_;  // Not owned.
  const std::vector<VariableSpec> specs_;
  std::vector<int64_t> offsets_;  // per variable, in the flat buffers
  int64_t flat_size_ = 0;
  DeviceTensor weights_, gradients_;
  std::unique_ptr<Cifar10TutorialNet> net_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_TRAIN_TUTORIAL_TRAINER_H_
