#include "worker/train/adam.h"

#include "absl/strings/str_cat.h"
#include "common/adam.h"

namespace psgd {

namespace {

AdamHyper HyperOf(const AdamOptions& o) {
  return AdamHyper{o.learning_rate, o.beta1, o.beta2, o.epsilon};
}

}  // namespace

absl::Status ValidateAdamOptions(const AdamOptions& o) {
  if (const absl::optional<OptimizerOptionProblem> bad =
          FindOptimizerOptionProblem(HyperOf(o), /*adam=*/true);
      bad.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "adam: ", bad->field, " is ", static_cast<float>(bad->value), ", ",
        bad->rule));
  }
  return absl::OkStatus();
}

void AdamUpdate(const AdamOptions& o, int64_t t, absl::Span<float> w,
                absl::Span<float> m, absl::Span<float> v,
                absl::Span<const float> g) {
  const AdamStep c = TensorFlowAdamStep(HyperOf(o), t);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = AdamElement(c, w[i], g[i], &m[i], &v[i]);
  }
}

absl::Status LocalAdam::Apply(const NamedTensors& gradients,
                              NamedTensors* weights) {
  for (const auto& [name, w] : *weights) {
    auto g = gradients.find(name);
    if (g == gradients.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("adam: no gradient for '", name, "'"));
    }
    if (g->second.shape() != w.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("adam: gradient of '", name, "' has shape ",
                       ShapeToString(g->second.shape()), ", the weight ",
                       ShapeToString(w.shape())));
    }
  }
  ++t_;
  for (auto& [name, w] : *weights) {
    Slots& s = slots_[name];
    if (s.m.shape() != w.shape()) {
      s.m = Tensor(w.shape());
      s.v = Tensor(w.shape());
    }
    AdamUpdate(options_, t_, w.span(), s.m.span(), s.v.span(),
               gradients.at(name).span());
  }
  return absl::OkStatus();
}

}  // namespace psgd
