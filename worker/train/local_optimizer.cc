#include "worker/train/local_optimizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/lr_schedule.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

// OK when `tensors` holds `v` with its shape; INVALID_ARGUMENT naming it.
absl::Status Check(const NamedTensors& tensors, const VariableSpec& v,
                   absl::string_view what) {
  auto it = tensors.find(v.name);
  if (it == tensors.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: no ", what, " for '", v.name, "'"));
  }
  if (it->second.shape() != v.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: ", what, " of '", v.name, "' has shape ",
                     ShapeToString(it->second.shape()), ", the variable ",
                     ShapeToString(v.shape)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalOptimizer>> LocalOptimizer::Create(
    const ps::OptimizerOptions& options,
    const std::vector<VariableSpec>& variables) {
  if (const absl::optional<std::string> name =
          FirstUnknownVariable(options.no_weight_decay, variables)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer option no_weight_decay: '", *name,
                     "' is not a variable of the model"));
  }
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  for (const VariableSpec& v : variables) {
    sizes.push_back(NumElements(v.shape));
    names.push_back(v.name);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ps::Optimizer> optimizer,
                   ps::CreateOptimizer(options, std::move(sizes), names));
  return std::unique_ptr<LocalOptimizer>(
      new LocalOptimizer(options, variables, std::move(optimizer)));
}

absl::Status LocalOptimizer::Apply(const NamedTensors& gradients,
                                   NamedTensors* weights) {
  // Checked whole before anything changes.
  for (const VariableSpec& v : variables_) {
    RETURN_IF_ERROR(Check(*weights, v, "weight"));
    RETURN_IF_ERROR(Check(gradients, v, "gradient"));
  }
  std::vector<const float*> g;
  std::vector<float*> w;
  for (const VariableSpec& v : variables_) {
    w.push_back(weights->at(v.name).data());
    g.push_back(gradients.at(v.name).data());
  }
  const std::vector<const float*> in(w.begin(), w.end());
  optimizer_->Apply(in, g, w, /*lr_scale=*/1.0);
  return absl::OkStatus();
}

double LocalOptimizer::next_learning_rate() const {
  return options_.learning_rate *
         LrFactor(options_.schedule, optimizer_->step() + 1);
}

}  // namespace psgd
