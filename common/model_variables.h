// The variables of a model as the parameter servers and the workers agree on
// them: a name, a shape and how to initialise it. Workers compute with them
// (worker/models), servers store and update them (ps/), and both place them
// on shards from this same list.
//
// Thread-safety: plain values.
#ifndef PSGD_COMMON_MODEL_VARIABLES_H_
#define PSGD_COMMON_MODEL_VARIABLES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/tensor.h"

namespace psgd {

struct Initializer {
  enum class Kind { kConstant, kTruncatedNormal };
  Kind kind = Kind::kConstant;
  // kConstant: every element is `value`. kTruncatedNormal: normal with mean
  // 0 and standard deviation `stddev`, redrawn beyond two deviations (as
  // TensorFlow's truncated_normal_initializer).
  float value = 0.0f;
  float stddev = 0.0f;

  static Initializer Constant(float v) { return {Kind::kConstant, v, 0.0f}; }
  static Initializer TruncatedNormal(float s) {
    return {Kind::kTruncatedNormal, 0.0f, s};
  }
};

// What a variable is, carried with it from the network description that
// makes it (worker/models, a torch module's batch-norm layers) to the
// servers' Initialize, their variable list and their checkpoints: nothing
// learns it from a name.
enum class VariableKind {
  // Trained: the optimizer updates it from the pushed gradients.
  kParameter,
  // Batch norm's running mean or variance with the statistics on the
  // servers (docs/CLUSTER.md, "Batch norm"): no optimizer touches it; a
  // push carries the worker's batch statistic under its name (the batch
  // mean; the unbiased batch variance), which the servers fold in as
  // PyTorch does, r = (1 - kBatchNormMomentum) * r + kBatchNormMomentum * b,
  // in float32.
  kRunningStatistic,
};

// "parameter", "running statistic".
const char* VariableKindName(VariableKind kind);

// A row slice of a larger variable (ps/state/placement.h cuts them): rows
// [row_begin, row_begin + shape[0]) of dimension 0 of `variable`, its
// part-th slice.
struct SliceOf {
  std::string variable;
  int part = 0;
  int64_t row_begin = 0;

  bool operator==(const SliceOf& o) const {
    return variable == o.variable && part == o.part && row_begin == o.row_begin;
  }
};

struct VariableSpec {
  VariableSpec() = default;
  VariableSpec(std::string name, Shape shape, Initializer init = Initializer(),
               VariableKind kind = VariableKind::kParameter,
               absl::optional<SliceOf> slice_of = absl::nullopt)
      : name(std::move(name)),
        shape(std::move(shape)),
        init(init),
        kind(kind),
        slice_of(std::move(slice_of)) {}

  std::string name;  // e.g. "conv1/weights"
  Shape shape;
  Initializer init;
  VariableKind kind = VariableKind::kParameter;
  // Set on a slice a shard stores (Placement::ShardVariables); a variable
  // of a network is whole.
  absl::optional<SliceOf> slice_of;

  bool is_statistic() const { return kind == VariableKind::kRunningStatistic; }
  // The variable this is or is a slice of.
  const std::string& variable() const {
    return slice_of.has_value() ? slice_of->variable : name;
  }
};

// Sum of the element counts.
int64_t TotalParameters(const std::vector<VariableSpec>& specs);

// OK when names are non-empty and unique and every shape is valid;
// INVALID_ARGUMENT naming the first offending variable otherwise.
absl::Status ValidateVariableSpecs(const std::vector<VariableSpec>& specs);

// The first of `names` that is not the name of one of `specs`; nullopt when
// every one is (e.g. an optimizer's no_weight_decay list against a model).
absl::optional<std::string> FirstUnknownVariable(
    const std::vector<std::string>& names,
    const std::vector<VariableSpec>& specs);

// The running statistics' fold (VariableKind::kRunningStatistic).
inline constexpr float kBatchNormMomentum = 0.1f;
// The fold, element by element; `out` may be `running`.
void FoldRunningStatistic(const float* running, const float* batch, int64_t n,
                          float* out);

// The variables of TensorFlow's cifar10 tutorial network on 24x24 crops,
// 1,068,298 parameters. Layouts (what the backends compute with):
//   conv*/weights  (out_channels, in_channels, 5, 5)   OIHW
//   local*/weights, softmax_linear/weights  (inputs, outputs)
//   */biases       (outputs)
// Initial values as the tutorial: truncated normal with stddev 5e-2, 5e-2,
// 0.04, 0.04, 1/192 for the weights; biases 0, 0.1, 0.1, 0.1, 0.
std::vector<VariableSpec> Cifar10TutorialVariables();

// Softmax regression on the same 24x24 crops, for tests and soak runs that
// need many cheap workers (17,290 parameters):
//   linear/weights  (1728, 10)   truncated normal, stddev 1e-2
//   linear/biases   (10)         0
// The 1728 inputs are an image's (3, 24, 24) values flattened in (C, H, W)
// order.
std::vector<VariableSpec> Cifar10LinearVariables();

}  // namespace psgd

#endif  // PSGD_COMMON_MODEL_VARIABLES_H_
