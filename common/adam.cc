#include "common/adam.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace {

AdamStep Common(const AdamHyper& h) {
  AdamStep c;
  c.beta1 = static_cast<float>(h.beta1);
  c.one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
  c.beta2 = static_cast<float>(h.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
  c.epsilon = static_cast<float>(h.epsilon);
  return c;
}

}  // namespace

AdamStep TensorFlowAdamStep(const AdamHyper& h, int64_t t, double lr_scale) {
  const double td = static_cast<double>(t);
  AdamStep c = Common(h);
  c.step_size = static_cast<float>(h.learning_rate * lr_scale *
                                   std::sqrt(1.0 - std::pow(h.beta2, td)) /
                                   (1.0 - std::pow(h.beta1, td)));
  c.sqrt_v_scale = 1.0f;
  return c;
}

AdamStep PyTorchAdamStep(const AdamHyper& h, int64_t t) {
  const double td = static_cast<double>(t);
  AdamStep c = Common(h);
  c.step_size =
      static_cast<float>(h.learning_rate / (1.0 - std::pow(h.beta1, td)));
  c.sqrt_v_scale =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(h.beta2, td)));
  return c;
}

absl::optional<OptimizerOptionProblem> FindOptimizerOptionProblem(
    const AdamHyper& h, bool adam) {
  auto positive = [](double x) { return std::isfinite(x) && x > 0; };
  if (!positive(h.learning_rate)) {
    return OptimizerOptionProblem{"learning_rate", h.learning_rate,
                                  "must be positive and finite"};
  }
  if (!adam) return absl::nullopt;
  if (!(h.beta1 >= 0 && h.beta1 < 1)) {
    return OptimizerOptionProblem{"beta1", h.beta1, "must be in [0, 1)"};
  }
  if (!(h.beta2 >= 0 && h.beta2 < 1)) {
    return OptimizerOptionProblem{"beta2", h.beta2, "must be in [0, 1)"};
  }
  if (!positive(h.epsilon)) {
    return OptimizerOptionProblem{"epsilon", h.epsilon,
                                  "must be positive and finite"};
  }
  return absl::nullopt;
}

absl::optional<OptimizerOptionProblem> FindSgdOptionProblem(
    const SgdHyper& h, absl::string_view kind) {
  const bool momentum_kind = kind == "momentum";
  if (!(h.momentum >= 0 && h.momentum < 1)) {
    return OptimizerOptionProblem{"momentum", h.momentum, "must be in [0, 1)"};
  }
  if (h.momentum != 0 && !momentum_kind) {
    return OptimizerOptionProblem{
        "momentum", h.momentum,
        absl::StrCat("is for kind MOMENTUM, not ", kind)};
  }
  if (h.nesterov && !(momentum_kind && h.momentum > 0)) {
    return OptimizerOptionProblem{"nesterov", 1.0,
                                  "needs kind MOMENTUM with momentum > 0"};
  }
  if (!(std::isfinite(h.weight_decay) && h.weight_decay >= 0)) {
    return OptimizerOptionProblem{"weight_decay", h.weight_decay,
                                  "must be >= 0 and finite"};
  }
  if (h.weight_decay != 0 && kind == "adam") {
    return OptimizerOptionProblem{
        "weight_decay", h.weight_decay,
        "is for SGD and MOMENTUM (Adam keeps TensorFlow's form)"};
  }
  return absl::nullopt;
}

}  // namespace psgd
