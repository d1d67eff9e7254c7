// Adam, exactly as TensorFlow's AdamOptimizer (the update train_local
// applies locally; the arithmetic is common/adam.h's, the same as the
// parameter servers'):
//
//   lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   w -= lr_t * m / (sqrt(v) + epsilon)
//
// Thread-safety: AdamUpdate is a pure function over caller-owned spans;
// LocalAdam is used by one thread at a time.
#ifndef PSGD_WORKER_TRAIN_ADAM_H_
#define PSGD_WORKER_TRAIN_ADAM_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "worker/models/model.h"

namespace psgd {

struct AdamOptions {
  float learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

// INVALID_ARGUMENT naming the field unless learning_rate > 0, beta1 and
// beta2 in [0, 1) and epsilon > 0.
absl::Status ValidateAdamOptions(const AdamOptions& options);

// One Adam step number `t` (1-based) on w with gradient g and slots m, v.
// w, m, v, g: (n), equal lengths (checked by the caller).
void AdamUpdate(const AdamOptions& options, int64_t t, absl::Span<float> w,
                absl::Span<float> m, absl::Span<float> v,
                absl::Span<const float> g);

// Adam over a model's named variables, with zero-initialised slots.
class LocalAdam {
 public:
  explicit LocalAdam(const AdamOptions& options) : options_(options) {}

  // Applies one step to every weight with the gradient of the same name.
  // INVALID_ARGUMENT (nothing applied) when a weight has no gradient or the
  // shapes differ.
  absl::Status Apply(const NamedTensors& gradients, NamedTensors* weights);

  int64_t steps() const { return t_; }

 private:
  struct Slots {
    Tensor m, v;
  };
  const AdamOptions options_;
  int64_t t_ = 0;
  absl::flat_hash_map<std::string, Slots> slots_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_TRAIN_ADAM_H_
