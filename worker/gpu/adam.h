// Adam as torch.optim.Adam computes it (no weight decay, no amsgrad), for
// the device-resident training step of gpu_bench: the constants of a step,
// and a host reference that the GPU kernel (LaunchAdam in elementwise.h) is
// tested against and that CPU runs of the benchmark use. The arithmetic is
// common/adam.h's (PyTorch's form there), shared with the parameter
// servers' and the local trainer's Adam (TensorFlow's form):
//
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   w -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
//
// Thread-safety: pure functions.
#ifndef PSGD_WORKER_GPU_ADAM_H_
#define PSGD_WORKER_GPU_ADAM_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/adam.h"

namespace psgd::gpu {

struct AdamParams {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

// The constants of step t >= 1 (PyTorch's form), computed in float64.
AdamStep ComputeAdamStepConstants(const AdamParams& params, int64_t step);

// w, g, m, v: (n) host memory, equal sizes. The same float operations in the
// same order as the GPU kernel (both call AdamElement).
void AdamUpdateReference(const AdamParams& params, int64_t step,
                         absl::Span<float> w, absl::Span<const float> g,
                         absl::Span<float> m, absl::Span<float> v);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_ADAM_H_
