#include "worker/train/adam.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psgd {

absl::Status ValidateAdamOptions(const AdamOptions& o) {
  if (!(o.learning_rate > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "adam: learning_rate is ", o.learning_rate, ", must be positive"));
  }
  if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam: beta1 is ", o.beta1, ", must be in [0, 1)"));
  }
  if (!(o.beta2 >= 0.0f && o.beta2 < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam: beta2 is ", o.beta2, ", must be in [0, 1)"));
  }
  if (!(o.epsilon > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam: epsilon is ", o.epsilon, ", must be positive"));
  }
  return absl::OkStatus();
}

void AdamUpdate(const AdamOptions& o, int64_t t, absl::Span<float> w,
                absl::Span<float> m, absl::Span<float> v,
                absl::Span<const float> g) {
  const double td = static_cast<double>(t);
  const float lr_t = static_cast<float>(
      o.learning_rate * std::sqrt(1.0 - std::pow(double{o.beta2}, td)) /
      (1.0 - std::pow(double{o.beta1}, td)));
  const float b1 = o.beta1, b2 = o.beta2;
  for (size_t i = 0; i < w.size(); ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + o.epsilon);
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
