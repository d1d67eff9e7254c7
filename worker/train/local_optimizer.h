// The optimizer train_local applies in the worker: the parameter servers'
// own (ps/state/optimizer.h: TensorFlow's Adam, SGD, PyTorch's momentum SGD
// with Nesterov and weight decay, the learning-rate schedules of
// common/lr_schedule.h), over a model's variables instead of a shard's
// slices, so that a local baseline and a cluster run apply the same update.
//
// Thread-safety: used by one thread at a time.
#ifndef PSGD_WORKER_TRAIN_LOCAL_OPTIMIZER_H_
#define PSGD_WORKER_TRAIN_LOCAL_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_variables.h"
#include "ps/state/optimizer.h"
#include "ps/state/options.h"
#include "worker/models/model.h"

namespace psgd {

class LocalOptimizer {
 public:
  // An optimizer of `options` for `variables` (zero slots, step 0).
  // INVALID_ARGUMENT naming the field for options the servers would refuse
  // ("optimizer option momentum=1: ..."), or a no_weight_decay name that is
  // not one of the variables.
  static absl::StatusOr<std::unique_ptr<LocalOptimizer>> Create(
      const ps::OptimizerOptions& options,
      const std::vector<VariableSpec>& variables);

  // One update of every variable with the gradient of the same name.
  // INVALID_ARGUMENT naming the variable (nothing applied) when a weight or
  // a gradient is missing or has another shape.
  absl::Status Apply(const NamedTensors& gradients, NamedTensors* weights);

  // Updates applied so far (Adam's t).
  int64_t steps() const { return optimizer_->step(); }
  // The learning rate the next update applies: the options' times the
  // schedule's factor.
  double next_learning_rate() const;
  const ps::OptimizerOptions& options() const { return options_; }

 private:
  LocalOptimizer(const ps::OptimizerOptions& options,
                 std::vector<VariableSpec> variables,
                 std::unique_ptr<ps::Optimizer> optimizer)
      : options_(options),
        variables_(std::move(variables)),
        optimizer_(std::move(optimizer)) {}

  const ps::OptimizerOptions options_;
  const std::vector<VariableSpec> variables_;  // the optimizer's order
  const std::unique_ptr<ps::Optimizer> optimizer_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_TRAIN_LOCAL_OPTIMIZER_H_
