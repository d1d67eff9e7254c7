// Adam's arithmetic and the rules of its options, written once for the
// optimizers that use it: the parameter servers' (ps/state/optimizer.h,
// TensorFlow's form, which train_local also runs: worker/train/
// local_optimizer.h) and the GPU trainer's (worker/gpu/adam.h and its
// kernel, PyTorch's form, to match the peer it is measured against). Both
// forms are one element update with different constants:
//
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   w = w - step_size * m / (sqrt(v) * sqrt_v_scale + epsilon)
//
//   TensorFlow: step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t),
//               sqrt_v_scale = 1 ("epsilon hat")
//   PyTorch:    step_size = lr / (1 - beta1^t),
//               sqrt_v_scale = 1 / sqrt(1 - beta2^t)
//
// The constants are computed in double from the options and rounded to
// float once; the element update is float, usable in CUDA kernels.
//
// Thread-safety: plain values and pure functions.
#ifndef PSGD_COMMON_ADAM_H_
#define PSGD_COMMON_ADAM_H_

#include <math.h>

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

#if defined(__CUDACC__)
#define PSGD_HOST_DEVICE __host__ __device__
#else
#define PSGD_HOST_DEVICE
#endif

namespace psgd {

// Adam's options (a float option converts to double exactly).
struct AdamHyper {
  double learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// The constants of one step.
struct AdamStep {
  float beta1 = 0.0f;
  float one_minus_beta1 = 0.0f;
  float beta2 = 0.0f;
  float one_minus_beta2 = 0.0f;
  float step_size = 0.0f;
  float sqrt_v_scale = 1.0f;
  float epsilon = 0.0f;
};

// Step t >= 1 in TensorFlow's form, with the learning rate times lr_scale
// (the async staleness scaling of the servers).
AdamStep TensorFlowAdamStep(const AdamHyper& hyper, int64_t t,
                            double lr_scale = 1.0);
// Step t >= 1 in PyTorch's form.
AdamStep PyTorchAdamStep(const AdamHyper& hyper, int64_t t);

// One element: updates *m and *v, returns the new weight.
PSGD_HOST_DEVICE inline float AdamElement(const AdamStep& c, float w, float g,
                                          float* m, float* v) {
  const float mi = c.beta1 * *m + c.one_minus_beta1 * g;
  const float vi = c.beta2 * *v + c.one_minus_beta2 * g * g;
  *m = mi;
  *v = vi;
  return w - c.step_size * mi / (sqrtf(vi) * c.sqrt_v_scale + c.epsilon);
}

// The rules of an optimizer's options, the same wherever they are given
// (config file, server flags, local trainer). The first option out of
// range: its name ("learning_rate", "beta1", "beta2", "epsilon") and what
// it must be; nullopt when all are fine. beta1, beta2 and epsilon are
// checked only when `adam`.
struct OptimizerOptionProblem {
  std::string field;
  double value = 0.0;
  std::string rule;  // e.g. "must be in [0, 1)"
};
absl::optional<OptimizerOptionProblem> FindOptimizerOptionProblem(
    const AdamHyper& hyper, bool adam);

// SGD's and momentum SGD's options (PyTorch's SGD, dampening 0).
struct SgdHyper {
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};
// The first of them out of range for an optimizer of kind "adam", "sgd" or
// "momentum": momentum in [0, 1) and only for "momentum"; nesterov only
// with momentum > 0; weight_decay >= 0, finite, and 0 for "adam".
absl::optional<OptimizerOptionProblem> FindSgdOptionProblem(
    const SgdHyper& hyper, absl::string_view kind);

}  // namespace psgd

#endif  // PSGD_COMMON_ADAM_H_
