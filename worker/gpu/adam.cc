#include "worker/gpu/adam.h"

#include <cmath>
#include <cstddef>

namespace psgd::gpu {

AdamStepConstants ComputeAdamStepConstants(const AdamParams& params,
                                           int64_t step) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(double{params.beta1}, t);
  const double bias_correction2 = 1.0 - std::pow(double{params.beta2}, t);
  AdamStepConstants c;
  c.step_size =
      static_cast<float>(double{params.learning_rate} / bias_correction1);
  c.inv_sqrt_bias_correction2 =
      static_cast<float>(1.0 / std::sqrt(bias_correction2));
  return c;
}

void AdamUpdateReference(const AdamParams& params, int64_t step,
                         absl::Span<float> w, absl::Span<const float> g,
                         absl::Span<float> m, absl::Span<float> v) {
  const AdamStepConstants c = ComputeAdamStepConstants(params, step);
  for (size_t i = 0; i < w.size(); ++i) {
    const float gi = g[i];
    const float mi = params.beta1 * m[i] + (1.0f - params.beta1) * gi;
    const float vi = params.beta2 * v[i] + (1.0f - params.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= c.step_size * mi /
            (std::sqrt(vi) * c.inv_sqrt_bias_correction2 + params.epsilon);
  }
}

}  // namespace psgd::gpu
