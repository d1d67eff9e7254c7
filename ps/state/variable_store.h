// The variables of one shard: their names and shapes (fixed by the first
// Initialize) and their values as immutable, versioned snapshots.
//
// An update never writes into a published snapshot: it computes the next
// version into a fresh (or recycled) buffer and publishes it, so a pull can
// serialise the weights it holds without a lock while pushes go on. A
// snapshot's buffers return to the store's pool when its last holder lets
// go.
//
// Thread-safety: VariableStore is not thread-safe (the shard calls it under
// its mutex), except that the snapshots it hands out may be read and released
// from any thread, also after the store is gone.
#ifndef PSGD_PS_STATE_VARIABLE_STORE_H_
#define PSGD_PS_STATE_VARIABLE_STORE_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "common/model_variables.h"
#include "common/tensor.h"
#include "ps/state/types.h"

namespace psgd {
class ThreadPool;
namespace ps {

// Names, shapes and kinds of a shard's variables, in the order of the first
// Initialize (or of the checkpoint restored). Immutable.
struct VariableLayout {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<int64_t> sizes;  // elements
  std::vector<VariableKind> kinds;
  // For a row slice of a larger variable: that variable, the part, the
  // first row (as the Initialize said; ps/state/placement.h cuts them).
  std::vector<absl::optional<SliceOf>> slices;
  // kinds[i] == kRunningStatistic, for the hot paths: batch norm's running
  // statistics, which no optimizer touches; a push's values for them are
  // batch statistics that the shard folds in (common/model_variables.h).
  std::vector<bool> statistic;
  int num_statistics = 0;
  absl::flat_hash_map<std::string, int> index;
  int64_t num_parameters = 0;

  // What the optimizer updates: sizes, with 0 for a running statistic (it
  // keeps no slots for them and writes nothing there).
  std::vector<int64_t> OptimizerSizes() const;

  int size() const { return static_cast<int>(names.size()); }
  // Appends variable `name` of `shape` and `kind`, a row slice of a larger
  // variable when `slice_of` is set: the one way a layout is built (the
  // store's Create, a checkpoint's decoding). INVALID_ARGUMENT when the name
  // is empty or already there, or a slice names no variable.
  absl::Status Add(std::string name, Shape shape, VariableKind kind,
                   absl::optional<SliceOf> slice_of = absl::nullopt);
  // Variable i as a spec (no initializer).
  VariableSpec Spec(int i) const;
  // The variable each entry is or is a slice of, in layout order: what an
  // optimizer's per-variable settings (no_weight_decay) name.
  std::vector<std::string> VariableNames() const;
  // Index of `name`, or -1.
  int Find(absl::string_view name) const;
  // The indices of `names` (a pull of some variables, PullRequest.variables)
  // in that order; every index for none. INVALID_ARGUMENT naming the tensor
  // for an unknown or a repeated name.
  absl::StatusOr<std::vector<int>> Select(
      absl::Span<const std::string> names) const;
};

// One version of a shard's weights. Immutable once published.
struct WeightsSnapshot {
  int64_t step = 0;
  // The cluster's generation the weights belong to (docs/RELIABILITY.md).
  int64_t generation = 1;
  // The learning rate of the update that made these weights
  // (Optimizer::NextRate before it); 0: not known (step 0, a restore).
  double learning_rate = 0.0;
  std::shared_ptr<const VariableLayout> layout;
  std::vector<Tensor> weights;  // in layout order
};

// The largest gradient magnitude a shard takes. The optimizer's float32
// arithmetic cannot overflow on such values (Adam squares them: 1e36 <
// FLT_MAX ~ 3.4e38; a sync sum of M of them stays far below it too), so the
// weights and the optimizer slots stay finite; a larger value comes from a
// diverged worker. (Finite gradients up to FLT_MAX used to turn Adam's v to
// Inf, and a sync sum of two to Inf and the weights to NaN: the shard fuzzer
// found it, tests/fuzz/shard_fuzz.h.)
inline constexpr float kMaxGradientMagnitude = 1e18f;

// Checks what can be checked of a float tensor without the shard's layout:
// dtype float32, a valid shape, data of exactly product(shape) * 4 bytes at a
// 4-byte-aligned address, every value finite and of magnitude at most
// `max_magnitude`. INVALID_ARGUMENT naming `what` (e.g. "gradient"), the
// tensor and the value. With `copy_to` (room for product(shape) floats) the
// data is copied there in the pass that checks the values (what it holds
// after a refusal is unspecified). A tensor marked `checked` (its values
// scanned already, as they were copied: TensorBytes::checked) and no
// `copy_to`: the values are not scanned again. `pool` (null: the caller
// alone) shares the pass among its threads.
absl::Status CheckFloatTensor(
    const TensorBytes& tensor, absl::string_view what,
    float max_magnitude = std::numeric_limits<float>::max(),
    float* copy_to = nullptr, ThreadPool* pool = nullptr);
// CheckFloatTensor of each of `tensors` (copy_to[k] for tensor k, null:
// none), their value passes laid end to end and split over the pool's
// threads as one loop: the tensors of a push share the threads, where one
// loop a tensor would leave each smaller than a thread's least part
// (kMinBulkPartBytes) on one. Each tensor's status, in order.
std::vector<absl::Status> CheckFloatTensors(
    absl::Span<const TensorBytes> tensors, absl::string_view what,
    float max_magnitude, absl::Span<float* const> copy_to, ThreadPool* pool);

class VariableStore {
 public:
  // A store holding `initial` at `step` (0 for the initial values, the
  // saved step for a restored checkpoint). INVALID_ARGUMENT when a tensor
  // fails CheckFloatTensor, a name is empty or repeated, or there is no
  // tensor.
  static absl::StatusOr<std::unique_ptr<VariableStore>> Create(
      absl::Span<const TensorBytes> initial, int64_t step = 0,
      int64_t generation = 1);

  VariableStore(const VariableStore&) = delete;
  VariableStore& operator=(const VariableStore&) = delete;

  const VariableLayout& layout() const { return *layout_; }
  std::shared_ptr<const VariableLayout> shared_layout() const {
    return layout_;
  }

  // OK when `tensors` name exactly the stored variables with their shapes
  // and kinds (in any order); FAILED_PRECONDITION naming the first
  // difference.
  absl::Status CheckSameVariables(absl::Span<const TensorBytes> tensors) const;

  // Orders a push's gradients by layout: (*ordered)[i] is the data of
  // variable i, null for one marked no_gradient. INVALID_ARGUMENT naming
  // the gradient when one is unknown,
  // repeated, missing or of another shape. Values are not checked here
  // (CheckFloatTensor does that).
  // The layout index of gradient `g`'s variable; INVALID_ARGUMENT naming
  // the tensor for an unknown name or another shape.
  absl::StatusOr<int> MatchGradient(const TensorBytes& g) const;
  absl::Status MatchGradients(absl::Span<const TensorBytes> gradients,
                              std::vector<const float*>* ordered) const;

  // The current version.
  std::shared_ptr<const WeightsSnapshot> current() const { return current_; }

  // Computes and publishes version `step`: update(in, out) must write every
  // element of out[i] from in[i] (the current weights, in layout order).
  // `learning_rate`: the update's, kept with the version.
  using UpdateFn = std::function<void(absl::Span<const float* const> in,
                                      absl::Span<float* const> out)>;
  void Update(int64_t step, const UpdateFn& update, double learning_rate = 0.0);

  // Versions of the weights in memory (memory accounting): the current one,
  // those that pulls in flight (or delay compensation) still hold, and up
  // to two spares kept for the next updates. Each is layout().sizes' floats.
  int64_t versions_in_memory() const;

  // Tags the current weights and every later version with `generation`
  // (publishes a copy of the current weights so tagged).
  void SetGeneration(int64_t generation);

 private:
  class Pool;
  VariableStore(std::shared_ptr<const VariableLayout> layout,
                std::shared_ptr<Pool> pool);
  std::shared_ptr<const WeightsSnapshot> Publish(
      std::unique_ptr<WeightsSnapshot> snapshot);

  const std::shared_ptr<const VariableLayout> layout_;
  const std::shared_ptr<Pool> pool_;
  int64_t generation_ = 1;
  std::shared_ptr<const WeightsSnapshot> current_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_VARIABLE_STORE_H_
