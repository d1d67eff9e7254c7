#include "worker/gpu/adam.h"

#include <cstddef>

namespace psgd::gpu {

AdamStep ComputeAdamStepConstants(const AdamParams& params, int64_t step) {
  return PyTorchAdamStep(AdamHyper{params.learning_rate, params.beta1,
                                   params.beta2, params.epsilon},
                         step);
}

void AdamUpdateReference(const AdamParams& params, int64_t step,
                         absl::Span<float> w, absl::Span<const float> g,
                         absl::Span<float> m, absl::Span<float> v) {
  const AdamStep c = ComputeAdamStepConstants(params, step);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = AdamElement(c, w[i], g[i], &m[i], &v[i]);
  }
}

}  // namespace psgd::gpu
