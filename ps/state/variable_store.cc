#include "ps/state/variable_store.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"

namespace psgd {
namespace ps {
namespace {

Shape ToShape(absl::Span<const int64_t> shape) {
  return Shape(shape.begin(), shape.end());
}

// The largest magnitude's bits (sign cleared) of n floats given as bits;
// compiled for AVX-512, AVX2 and the baseline.
__attribute__((target_clones("avx512f", "avx2", "default"))) uint32_t
MaxMagnitudeBits(const uint32_t* bits, int64_t n) {
  uint32_t max = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = bits[i] & 0x7fffffffu;
    max = b > max ? b : max;
  }
  return max;
}

// The same, copying the n floats to `out` in the pass that reads them.
__attribute__((target_clones("avx512f", "avx2", "default"))) uint32_t
CopyMaxMagnitudeBits(const uint32_t* bits, int64_t n,
                     uint32_t* __restrict out) {
  uint32_t max = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = bits[i];
    out[i] = b;
    const uint32_t m = b & 0x7fffffffu;
    max = m > max ? m : max;
  }
  return max;
}

// What a value pass found: nothing (index -1), or the first element that is
// NaN or of a magnitude above the limit, with its value. `changed`: a pass
// saw such a value, but the data no longer held one when it was looked for
// (memory that another process writes, read without `copy_to`).
struct Beyond {
  int64_t index = -1;
  float value = 0;
  bool changed = false;
};

// The first element of the `n` floats at `scanned` that is NaN or of a
// magnitude above `limit` (+-Inf always is); `changed` when there is none
// (the pass that found one read memory that another process writes).
Beyond FindBeyond(const char* scanned, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, scanned + i * sizeof(float), sizeof(f));
    if (!(std::fabs(f) <= limit)) return Beyond{i, f, false};
  }
  return Beyond{-1, 0, true};
}

}  // namespace

int VariableLayout::Find(absl::string_view name) const {
  auto it = index.find(name);
  return it == index.end() ? -1 : it->second;
}

namespace {

// CheckFloatTensor's checks that read no value.
absl::Status CheckFloatLayout(const TensorBytes& t, absl::string_view what) {
  if (t.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", what, " has an empty name"));
  }
  if (t.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", t.name, "' has dtype ", DTypeName(t.dtype),
                     "; this shard stores float32"));
  }
  const Shape shape = ToShape(t.shape);
  if (absl::Status s = ValidateShape(shape); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", t.name, "': ", s.message()));
  }
  const int64_t want = NumElements(shape) * static_cast<int64_t>(sizeof(float));
  if (static_cast<int64_t>(t.data.size()) != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", t.name, "' of shape ", ShapeToString(shape), " needs ",
        want, " bytes of float32 but carries ", t.data.size()));
  }
  if (reinterpret_cast<uintptr_t>(t.data.data()) % alignof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", t.name, "': data is not aligned to 4 bytes"));
  }
  return absl::OkStatus();
}

// What a value pass found, as CheckFloatTensor says it.
absl::Status BeyondStatus(const TensorBytes& t, absl::string_view what,
                          float max_magnitude, const Beyond& bad) {
  if (bad.changed) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", t.name, "' changed while it was checked (a value beyond +-",
        max_magnitude, " was read, then was no longer there)"));
  }
  if (bad.index >= 0) {
    if (!std::isfinite(bad.value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", t.name, "' has the non-finite value ",
                       bad.value, " at element ", bad.index));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", t.name, "' has the value ", bad.value,
                     " at element ", bad.index, ", beyond +-", max_magnitude,
                     ", the largest magnitude it may have"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFloatTensor(const TensorBytes& t, absl::string_view what,
                              float max_magnitude, float* copy_to,
                              ThreadPool* pool) {
  float* const copies[] = {copy_to};
  return CheckFloatTensors(absl::MakeConstSpan(&t, 1), what, max_magnitude,
                           copies, pool)[0];
}

std::vector<absl::Status> CheckFloatTensors(
    absl::Span<const TensorBytes> tensors, absl::string_view what,
    float max_magnitude, absl::Span<float* const> copy_to, ThreadPool* pool) {
  std::vector<absl::Status> out(tensors.size());
  // The value passes of the tensors whose layout holds, laid end to end.
  std::vector<int64_t> sizes(tensors.size(), 0);
  for (size_t k = 0; k < tensors.size(); ++k) {
    out[k] = CheckFloatLayout(tensors[k], what);
    if (out[k].ok() && !(tensors[k].checked && copy_to[k] == nullptr)) {
      sizes[k] = static_cast<int64_t>(tensors[k].data.size() / sizeof(float));
    }
  }
  // Magnitudes compare as their bit patterns with the sign cleared (NaN's
  // are above Inf's, which is above every finite one), so the pass is one
  // integer comparison per element and vectorises. A tensor cut between two
  // threads: its largest magnitude is the larger of theirs.
  uint32_t limit_bits;
  std::memcpy(&limit_bits, &max_magnitude, sizeof(limit_bits));
  std::unique_ptr<std::atomic<uint32_t>[]> max(
      new std::atomic<uint32_t>[tensors.size()]);
  for (size_t k = 0; k < tensors.size(); ++k) max[k] = 0;
  ParallelForSpans(
      pool, sizes, kMinBulkPartFloats,
      [&](size_t k, int64_t begin, int64_t end) {
        const uint32_t* bits =
            reinterpret_cast<const uint32_t*>(tensors[k].data.data()) + begin;
        const uint32_t m =
            copy_to[k] == nullptr
                ? MaxMagnitudeBits(bits, end - begin)
                : CopyMaxMagnitudeBits(
                      bits, end - begin,
                      reinterpret_cast<uint32_t*>(copy_to[k]) + begin);
        uint32_t seen = max[k].load(std::memory_order_relaxed);
        while (m > seen && !max[k].compare_exchange_weak(
                               seen, m, std::memory_order_relaxed)) {
        }
      });
  // A tensor with a value beyond: the first such element is looked for in
  // what the pass read (its copy when there is one: the data may be written
  // meanwhile) and named.
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (sizes[k] == 0 || max[k].load() <= limit_bits) continue;
    const char* scanned = copy_to[k] != nullptr
                              ? reinterpret_cast<const char*>(copy_to[k])
                              : tensors[k].data.data();
    out[k] = BeyondStatus(tensors[k], what, max_magnitude,
                          FindBeyond(scanned, sizes[k], max_magnitude));
  }
  return out;
}

// Spare snapshot buffers. Thread-safe: a snapshot's deleter returns its
// buffers from whichever thread drops the last reference.
class VariableStore::Pool {
 public:
  // Keeps at most this many spares; more are freed.
  static constexpr size_t kMaxSpares = 2;

  std::unique_ptr<WeightsSnapshot> Take() {
    MutexLock lock(&mu_);
    if (spares_.empty()) return nullptr;
    std::unique_ptr<WeightsSnapshot> s = std::move(spares_.back());
    spares_.pop_back();
    return s;
  }

  // Keeps `s` as a spare, or frees it (outside the lock) when there are
  // enough.
  void Return(std::unique_ptr<WeightsSnapshot> s) {
    MutexLock lock(&mu_);
    if (spares_.size() < kMaxSpares) {
      spares_.push_back(std::move(s));
    } else {
      versions_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  // A new version was allocated.
  void Created() { versions_.fetch_add(1, std::memory_order_relaxed); }
  // Versions in memory: published, held by pulls in flight, spare.
  int64_t versions() const { return versions_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> versions_{0};
  Mutex mu_;
  std::vector<std::unique_ptr<WeightsSnapshot>> spares_ ABSL_GUARDED_BY(mu_);
};

VariableStore::VariableStore(std::shared_ptr<const VariableLayout> layout,
                             std::shared_ptr<Pool> pool)
    : layout_(std::move(layout)), pool_(std::move(pool)) {}

absl::Status VariableLayout::Add(std::string name, Shape shape,
                                 VariableKind kind,
                                 absl::optional<SliceOf> slice_of) {
  if (name.empty()) return absl::InvalidArgumentError("a variable has no name");
  if (slice_of.has_value() && (slice_of->variable.empty() ||
                               slice_of->part < 0 || slice_of->row_begin < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable '", name, "' is a slice of '", slice_of->variable, "' part ",
        slice_of->part, " from row ", slice_of->row_begin,
        ", which names no slice"));
  }
  if (!index.emplace(name, size()).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", name, "' appears twice"));
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  kinds.push_back(kind);
  slices.push_back(std::move(slice_of));
  statistic.push_back(kind == VariableKind::kRunningStatistic);
  num_statistics += statistic.back() ? 1 : 0;
  names.push_back(std::move(name));
  shapes.push_back(std::move(shape));
  sizes.push_back(n);
  num_parameters += n;
  return absl::OkStatus();
}

VariableSpec VariableLayout::Spec(int i) const {
  VariableSpec spec;
  spec.name = names[i];
  spec.shape = shapes[i];
  spec.kind = kinds[i];
  spec.slice_of = slices[i];
  return spec;
}

std::vector<std::string> VariableLayout::VariableNames() const {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (int i = 0; i < size(); ++i) {
    out.push_back(slices[i].has_value() ? slices[i]->variable : names[i]);
  }
  return out;
}

std::vector<int64_t> VariableLayout::OptimizerSizes() const {
  std::vector<int64_t> out = sizes;
  for (int i = 0; i < size(); ++i) {
    if (statistic[i]) out[i] = 0;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<VariableStore>> VariableStore::Create(
    absl::Span<const TensorBytes> initial, int64_t step, int64_t generation) {
  if (initial.empty()) {
    return absl::InvalidArgumentError("initialize: no variables");
  }
  auto layout = std::make_shared<VariableLayout>();
  auto snapshot = std::make_unique<WeightsSnapshot>();
  for (const TensorBytes& t : initial) {
    if (absl::Status s = CheckFloatTensor(t, "initial value"); !s.ok()) {
      return s;
    }
    Tensor value(ToShape(t.shape));
    if (!t.kind.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initialize: variable '", t.name,
          "' does not say its kind (parameter or running statistic): a "
          "client older than this server?"));
    }
    absl::optional<SliceOf> slice_of;
    if (!t.slice_variable.empty()) {
      slice_of = SliceOf{std::string(t.slice_variable), t.slice_part,
                         t.slice_row_begin};
    }
    if (absl::Status s = layout->Add(std::string(t.name), value.shape(),
                                     *t.kind, std::move(slice_of));
        !s.ok()) {
      return Annotate(s, "initialize: ");
    }
    std::memcpy(value.data(), t.data.data(), t.data.size());
    snapshot->weights.push_back(std::move(value));
  }
  snapshot->layout = layout;
  snapshot->step = step;
  snapshot->generation = generation;
  std::unique_ptr<VariableStore> store(
      new VariableStore(std::move(layout), std::make_shared<Pool>()));
  store->generation_ = generation;
  store->pool_->Created();
  store->current_ = store->Publish(std::move(snapshot));
  return store;
}

absl::Status VariableStore::CheckSameVariables(
    absl::Span<const TensorBytes> tensors) const {
  std::vector<bool> seen(layout_->size(), false);
  for (const TensorBytes& t : tensors) {
    const int i = layout_->Find(t.name);
    if (i < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("initialize: variable '", t.name,
                       "' is not among the shard's stored variables"));
    }
    const Shape shape = ToShape(t.shape);
    if (shape != layout_->shapes[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("initialize: variable '", t.name, "' has shape ",
                       ShapeToString(shape), " but the stored one has shape ",
                       ShapeToString(layout_->shapes[i])));
    }
    if (t.kind.has_value() && *t.kind != layout_->kinds[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("initialize: variable '", t.name, "' is a ",
                       VariableKindName(*t.kind), " but the stored one is a ",
                       VariableKindName(layout_->kinds[i])));
    }
    seen[i] = true;
  }
  for (int i = 0; i < layout_->size(); ++i) {
    if (!seen[i]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "initialize: stored variable '", layout_->names[i], "' is missing"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> VariableLayout::Select(
    absl::Span<const std::string> names) const {
  std::vector<int> out;
  if (names.empty()) {
    for (int i = 0; i < size(); ++i) out.push_back(i);
    return out;
  }
  std::vector<bool> seen(size(), false);
  for (const std::string& name : names) {
    const int i = Find(name);
    if (i < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pull of unknown variable '", name, "'"));
    }
    if (seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("pull of variable '", name, "' twice"));
    }
    seen[i] = true;
    out.push_back(i);
  }
  return out;
}

absl::StatusOr<int> VariableStore::MatchGradient(const TensorBytes& g) const {
  const int i = layout_->Find(g.name);
  if (i < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient for unknown variable '", g.name, "'"));
  }
  const Shape shape = ToShape(g.shape);
  if (shape != layout_->shapes[i]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient '", g.name, "' has shape ", ShapeToString(shape),
        " but the variable has shape ", ShapeToString(layout_->shapes[i])));
  }
  return i;
}

absl::Status VariableStore::MatchGradients(
    absl::Span<const TensorBytes> gradients,
    std::vector<const float*>* ordered) const {
  ordered->assign(layout_->size(), nullptr);
  std::vector<bool> seen(layout_->size(), false);
  for (const TensorBytes& g : gradients) {
    const int i = layout_->Find(g.name);
    if (i >= 0 && seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("two gradients for variable '", g.name, "'"));
    }
    ASSIGN_OR_RETURN(const int matched, MatchGradient(g));
    seen[matched] = true;
    // A variable marked as without a gradient stays null.
    if (!g.no_gradient) {
      (*ordered)[matched] = reinterpret_cast<const float*>(g.data.data());
    }
  }
  for (int i = 0; i < layout_->size(); ++i) {
    if (!seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("no gradient for variable '", layout_->names[i], "'"));
    }
  }
  return absl::OkStatus();
}

void VariableStore::Update(int64_t step, const UpdateFn& update,
                           double learning_rate) {
  std::unique_ptr<WeightsSnapshot> next = pool_->Take();
  if (next == nullptr) {
    next = std::make_unique<WeightsSnapshot>();
    pool_->Created();
    next->layout = layout_;
    for (const Shape& shape : layout_->shapes)
      next->weights.emplace_back(shape);
  }
  std::vector<const float*> in;
  std::vector<float*> out;
  for (int i = 0; i < layout_->size(); ++i) {
    in.push_back(current_->weights[i].data());
    out.push_back(next->weights[i].data());
  }
  update(in, out);
  next->step = step;
  next->generation = generation_;
  next->learning_rate = learning_rate;
  current_ = Publish(std::move(next));
}

void VariableStore::SetGeneration(int64_t generation) {
  generation_ = generation;
  const int64_t step = current_->step;
  Update(
      step,
      [this](absl::Span<const float* const> in, absl::Span<float* const> out) {
        for (int i = 0; i < layout_->size(); ++i) {
          std::memcpy(out[i], in[i], layout_->sizes[i] * sizeof(float));
        }
      },
      current_->learning_rate);
}

int64_t VariableStore::versions_in_memory() const { return pool_->versions(); }

std::shared_ptr<const WeightsSnapshot> VariableStore::Publish(
    std::unique_ptr<WeightsSnapshot> snapshot) {
  // The deleter holds the pool, so that snapshots may outlive the store.
  std::shared_ptr<Pool> pool = pool_;
  return std::shared_ptr<const WeightsSnapshot>(
      snapshot.release(), [pool](const WeightsSnapshot* s) {
        pool->Return(
            std::unique_ptr<WeightsSnapshot>(const_cast<WeightsSnapshot*>(s)));
      });
}

}  // namespace ps
}  // namespace psgd
