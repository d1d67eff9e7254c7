// Emulated compute (docs/STRAGGLERS.md, proto/cluster.proto's `emulation`):
// a model of the registry's variables and shapes that computes nothing. A
// training step waits a drawn compute time and gives zero gradients of the
// model's real sizes (and zero batch statistics), so that its pushes and
// pulls move the real bytes through the real servers; the loss and accuracy
// it reports are 0. It exists so that timing studies can run 16-64 workers
// on a machine that could compute for a few; no accuracy comes from it.
//
// Thread-safety: thread-compatible, as every Model.
#ifndef PSGD_WORKER_MODELS_EMULATED_MODEL_H_
#define PSGD_WORKER_MODELS_EMULATED_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/models/model.h"

namespace psgd {

class EmulatedModel final : public Model {
 public:
  // Model `name` of the registry (INVALID_ARGUMENT naming the known ones
  // for another); each training step lasts `compute_time()`.
  static absl::StatusOr<std::unique_ptr<EmulatedModel>> Create(
      absl::string_view name, std::function<absl::Duration()> compute_time);

  std::string name() const override { return "emulated " + name_; }
  const std::vector<VariableSpec>& variables() const override {
    return variables_;
  }
  Shape image_shape() const override { return image_; }
  int64_t num_classes() const override { return 10; }
  absl::StatusOr<StepResult> ComputeGradients(const NamedConstViews& weights,
                                              ConstTensorView images,
                                              absl::Span<const int32_t> labels,
                                              NamedTensors* gradients) override;
  const std::vector<VariableSpec>& state() const override { return state_; }
  absl::Status GetState(NamedTensors* out) override;
  absl::Status SetState(const NamedConstViews& state) override {
    return absl::OkStatus();
  }
  absl::Status GetBatchStatistics(NamedTensors* out) override {
    return GetState(out);
  }
  // No evaluation: INVALID_ARGUMENT (the worker does not evaluate an
  // emulated model).
  absl::StatusOr<StepResult> Evaluate(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels) override;
  absl::Status Logits(const NamedConstViews& weights, ConstTensorView images,
                      TensorView logits) override;

 private:
  EmulatedModel() = default;

  std::string name_;
  std::vector<VariableSpec> variables_;
  std::vector<VariableSpec> state_;
  Shape image_;
  std::function<absl::Duration()> compute_time_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_EMULATED_MODEL_H_
