// The update rule a shard applies to its variables, behind an interface so
// that the shard does not care which (ps-lite's idea: the server's update is
// a function object plugged in from outside).
//
//   Adam, exactly TensorFlow's AdamOptimizer, per element in float32:
//     t     += 1                       (once per Apply, shared by the shard's
//                                       variables)
//     lr_t   = lr * sqrt(1 - beta2^t) / (1 - beta1^t)   computed in double,
//                                       then rounded to float once
//     m      = beta1 * m + (1 - beta1) * g
//     v      = beta2 * v + (1 - beta2) * g^2
//     w     -= lr_t * m / (sqrt(v) + epsilon)
//   (the arithmetic is common/adam.h's, shared with the workers' trainers)
//   Slots m and v are float32, zero at the start.
//
//   SGD: w -= lr * g.
//
//   Momentum SGD and SGD with weight decay, PyTorch's SGD (dampening 0):
//     d     = g + weight_decay * w      (not for variables in no_weight_decay)
//     buf   = momentum * buf + d        (slot "momentum", zero at the start)
//     d     = nesterov ? d + momentum * buf : buf
//     w    -= lr * d
//
// All multiply the learning rate by the lr_scale passed to Apply
// (staleness-aware async SGD passes 1/staleness).
//
// Thread-safety: none; the shard calls it under its mutex. With a pool
// (CreateOptimizer), an Apply's element-wise loops run on the pool's threads
// too, each element on one of them: the same bits as on one thread.
#ifndef PSGD_PS_STATE_OPTIMIZER_H_
#define PSGD_PS_STATE_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ps/state/options.h"

namespace psgd {
class ThreadPool;

namespace ps {

// An optimizer's state, for checkpoints: its kind, its step (Adam's t) and
// its slots, copied.
struct OptimizerState {
  OptimizerOptions::Kind kind = OptimizerOptions::Kind::kAdam;
  int64_t step = 0;
  // slots[k][i]: slot slot_names[k] of variable i, (sizes[i],).
  std::vector<std::string> slot_names;
  std::vector<std::vector<std::vector<float>>> slots;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // One update of every variable i of the shard:
  //   weights[i], grads[i], out[i]: (sizes()[i],)
  // out[i] = rule(weights[i], grads[i]); out[i] may equal weights[i].
  // grads[i] null: variable i had no gradient (a frozen or unused
  // parameter): out[i] = weights[i], and its slots and weight decay are
  // left alone (as torch.optim skips a parameter whose grad is None); the
  // step count, which is the shard's (TensorFlow's Adam keeps one t for all
  // variables), still advances.
  // Increments step(). The caller has checked the gradients (finite, sized).
  virtual void Apply(absl::Span<const float* const> weights,
                     absl::Span<const float* const> grads,
                     absl::Span<float* const> out, double lr_scale) = 0;

  // Number of Apply calls so far (Adam's t).
  virtual int64_t step() const = 0;

  // The learning rate the next Apply with `lr_scale` uses: the options'
  // learning_rate x the schedule's factor at update step() + 1 x lr_scale
  // (Adam's bias correction not included, as PyTorch's schedulers report
  // it). The servers record it with the weights each update makes.
  virtual double NextRate(double lr_scale) const = 0;

  // The slot `name` ("m", "v" for Adam) of variable `variable`; empty when
  // the optimizer has no such slot. For tests and checkpoints.
  virtual absl::Span<const float> Slot(absl::string_view name,
                                       int variable) const = 0;

  virtual absl::string_view name() const = 0;

  // Bytes the slots hold (memory accounting: ps/shard/shard.h Memory()).
  virtual int64_t SlotBytes() const = 0;

  // A copy of the state (for a checkpoint).
  virtual OptimizerState SaveState() const = 0;
  // Replaces the state with `state` (a restored checkpoint). INVALID_ARGUMENT
  // naming what differs when its kind, slot names or sizes are not this
  // optimizer's, or its step is negative; nothing changes then.
  virtual absl::Status LoadState(const OptimizerState& state) = 0;
};

// An optimizer for variables of `sizes` elements each. INVALID_ARGUMENT for
// options that ValidateShardOptions would refuse or a negative size.
// `variables` (empty, or one per entry: the variable each is or is a slice
// of, VariableLayout::VariableNames) decide which options.no_weight_decay
// exempts from weight decay. `pool` (not owned, outliving the optimizer;
// null: the caller's thread alone) shares each Apply among its threads.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerOptions& options, std::vector<int64_t> sizes,
    const std::vector<std::string>& variables = {}, ThreadPool* pool = nullptr);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_OPTIMIZER_H_
