#include "worker/models/emulated_model.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/models/registry.h"

namespace psgd {
namespace {

// Zeros of `specs`' shapes in `out`, allocated once and kept.
void Zeros(const std::vector<VariableSpec>& specs, NamedTensors* out) {
  for (const VariableSpec& v : specs) {
    auto it = out->find(v.name);
    if (it == out->end() || it->second.shape() != v.shape) {
      it = out->insert_or_assign(v.name, Tensor(v.shape)).first;
    }
    std::fill(it->second.data(), it->second.data() + it->second.size(), 0.0f);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmulatedModel>> EmulatedModel::Create(
    absl::string_view name, std::function<absl::Duration()> compute_time) {
  std::unique_ptr<EmulatedModel> m(new EmulatedModel());
  m->name_ = std::string(name);
  ASSIGN_OR_RETURN(m->variables_, ModelVariables(name));
  ASSIGN_OR_RETURN(m->state_, ModelState(name));
  absl::StatusOr<NetworkSpec> spec = ModelNetworkSpec(name);
  if (spec.ok()) {
    m->image_ = spec->image;
  } else if (absl::IsNotFound(spec.status())) {
    m->image_ = {3, 24, 24};  // the hand-written tutorial models' crops
  } else {
    return spec.status();
  }
  m->compute_time_ = std::move(compute_time);
  return m;
}

absl::StatusOr<StepResult> EmulatedModel::ComputeGradients(
    const NamedConstViews& weights, ConstTensorView images,
    absl::Span<const int32_t> labels, NamedTensors* gradients) {
  absl::SleepFor(compute_time_());
  Zeros(variables_, gradients);
  StepResult r;
  r.examples = static_cast<int64_t>(labels.size());
  return r;
}

absl::Status EmulatedModel::GetState(NamedTensors* out) {
  Zeros(state_, out);
  return absl::OkStatus();
}

absl::StatusOr<StepResult> EmulatedModel::Evaluate(
    const NamedConstViews& weights, ConstTensorView images,
    absl::Span<const int32_t> labels) {
  return absl::InvalidArgumentError(
      "an emulated model computes nothing and cannot be evaluated");
}

absl::Status EmulatedModel::Logits(const NamedConstViews& weights,
                                   ConstTensorView images, TensorView logits) {
  return absl::InvalidArgumentError(
      "an emulated model computes nothing and has no logits");
}

}  // namespace psgd
