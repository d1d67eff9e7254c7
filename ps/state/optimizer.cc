#include "ps/state/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/adam.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "common/thread_pool.h"

namespace psgd {
namespace ps {
namespace {

// Checks that `state` fits an optimizer of `kind` with `slot_names` over
// variables of `sizes` elements.
absl::Status CheckState(const OptimizerState& state,
                        OptimizerOptions::Kind want,
                        const std::vector<std::string>& slot_names,
                        const std::vector<int64_t>& sizes) {
  const absl::string_view kind = OptimizerKindName(want);
  if (state.kind != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state of kind '", OptimizerKindName(state.kind),
                     "' for a ", kind, " optimizer"));
  }
  if (state.step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state has step ", state.step));
  }
  if (state.slot_names != slot_names ||
      state.slots.size() != slot_names.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state has ", state.slots.size(), " slots, ",
                     kind, " has ", slot_names.size()));
  }
  for (size_t k = 0; k < state.slots.size(); ++k) {
    if (state.slots[k].size() != sizes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer slot '", slot_names[k], "' covers ", state.slots[k].size(),
          " variables, not ", sizes.size()));
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (static_cast<int64_t>(state.slots[k][i].size()) != sizes[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "optimizer slot '", slot_names[k], "' of variable ", i, " has ",
            state.slots[k][i].size(), " elements, not ", sizes[i]));
      }
    }
  }
  return absl::OkStatus();
}

// SGD and momentum SGD, PyTorch's formulas per element in float32
// (dampening 0; common/adam.h's SgdHyper):
//   d    = g + weight_decay_i * w        (weight_decay_i: 0 for the
//                                         variables in no_weight_decay)
//   buf  = momentum * buf + d            (momentum SGD; buf starts at 0, so
//                                         the first step's buf is d)
//   d    = nesterov ? d + momentum * buf : buf
//   w   -= lr * d
// A variable without a gradient in this update keeps its value.
void CopyUnchanged(int64_t n, const float* w, float* out) {
  if (out != w) std::copy(w, w + n, out);
}

int64_t BytesOf(const std::vector<AlignedBuffer>& buffers) {
  int64_t n = 0;
  for (const AlignedBuffer& b : buffers) n += b.size() * int64_t{sizeof(float)};
  return n;
}

// n elements of one variable's SGD update, by the formulas above (buf null:
// no momentum). The same bits as before the update went in pieces: the
// first branch is the formula with d = g.
__attribute__((target_clones("avx512f", "avx2", "default"))) void SgdUpdate(
    int64_t n, float lr, float wd, float momentum, bool nesterov,
    const float* __restrict w, const float* __restrict g, float* __restrict buf,
    float* __restrict o) {
  if (buf == nullptr && wd == 0) {
    for (int64_t i = 0; i < n; ++i) o[i] = w[i] - lr * g[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float d = wd == 0 ? g[i] : g[i] + wd * w[i];
    if (buf != nullptr) {
      const float b = momentum * buf[i] + d;
      buf[i] = b;
      d = nesterov ? d + momentum * b : b;
    }
    o[i] = w[i] - lr * d;
  }
}

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, std::vector<int64_t> sizes,
      std::vector<float> decay, ThreadPool* pool)
      : pool_(pool),
        kind_(o.kind),
        learning_rate_(o.learning_rate),
        momentum_(static_cast<float>(o.momentum)),
        nesterov_(o.nesterov),
        schedule_(o.schedule),
        sizes_(std::move(sizes)),
        decay_(std::move(decay)) {
    if (kind_ == OptimizerOptions::Kind::kMomentum) {
      for (int64_t n : sizes_) buf_.emplace_back(static_cast<size_t>(n));
      for (AlignedBuffer& b : buf_) buf_pointers_.push_back(b.data());
    }
  }

  void Apply(absl::Span<const float* const> weights,
             absl::Span<const float* const> grads, absl::Span<float* const> out,
             double lr_scale) override {
    const float lr = static_cast<float>(NextRate(lr_scale));
    float* const* bufs = buf_.empty() ? nullptr : buf_pointers_.data();
    ParallelForSpans(
        pool_, sizes_, kMinBulkPartFloats,
        [&](size_t k, int64_t begin, int64_t end) {
          const float* w = weights[k] + begin;
          const float* g = grads[k];
          float* o = out[k] + begin;
          if (g == nullptr) {  // no gradient: untouched, its slot too
            CopyUnchanged(end - begin, w, o);
            return;
          }
          SgdUpdate(end - begin, lr, decay_[k], momentum_, nesterov_, w,
                    g + begin, bufs == nullptr ? nullptr : bufs[k] + begin, o);
        });
    ++step_;
  }

  int64_t step() const override { return step_; }
  double NextRate(double lr_scale) const override {
    return learning_rate_ * lr_scale * LrFactor(schedule_, step_ + 1);
  }
  absl::Span<const float> Slot(absl::string_view name,
                               int variable) const override {
    if (name != "momentum" || buf_.empty() || variable < 0 ||
        variable >= static_cast<int>(buf_.size())) {
      return {};
    }
    return absl::MakeConstSpan(buf_[variable].data(), buf_[variable].size());
  }
  absl::string_view name() const override { return OptimizerKindName(kind_); }
  int64_t SlotBytes() const override { return BytesOf(buf_); }

  OptimizerState SaveState() const override {
    OptimizerState s;
    s.kind = kind_;
    s.step = step_;
    if (!buf_.empty()) {
      s.slot_names = {"momentum"};
      std::vector<std::vector<float>>& out = s.slots.emplace_back();
      for (const AlignedBuffer& b : buf_) {
        out.emplace_back(b.data(), b.data() + b.size());
      }
    }
    return s;
  }

  absl::Status LoadState(const OptimizerState& state) override {
    const std::vector<std::string> slots =
        buf_.empty() ? std::vector<std::string>{}
                     : std::vector<std::string>{"momentum"};
    if (absl::Status s = CheckState(state, kind_, slots, sizes_); !s.ok()) {
      return s;
    }
    step_ = state.step;
    for (size_t i = 0; i < buf_.size(); ++i) {
      std::copy(state.slots[0][i].begin(), state.slots[0][i].end(),
                buf_[i].data());
    }
    return absl::OkStatus();
  }

 private:
  ThreadPool* const pool_;             // not owned; null: the caller alone
  const OptimizerOptions::Kind kind_;  // kSgd or kMomentum
  const double learning_rate_;
  const float momentum_;
  const bool nesterov_;
  const LrSchedule schedule_;
  const std::vector<int64_t> sizes_;
  const std::vector<float> decay_;    // per variable
  std::vector<AlignedBuffer> buf_;    // momentum only
  std::vector<float*> buf_pointers_;  // buf_[k].data()
  int64_t step_ = 0;
};

// One variable's Adam update, element-wise by common/adam.h's AdamElement.
// Compiled for AVX-512, AVX2 and the baseline and chosen at load time (the
// same bits in each: no FMA contraction, -ffp-contract=off in the BUILD
// file, and no reordering).
__attribute__((target_clones("avx512f", "avx2", "default"))) void AdamUpdate(
    int64_t n, const AdamStep& step, const float* __restrict w,
    const float* __restrict g, float* __restrict m, float* __restrict v,
    float* __restrict o) {
  const AdamStep c = step;  // a local copy: o cannot alias it
  for (int64_t i = 0; i < n; ++i) {
    o[i] = AdamElement(c, w[i], g[i], &m[i], &v[i]);
  }
}

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, std::vector<int64_t> sizes, ThreadPool* pool)
      : pool_(pool), options_(o), sizes_(std::move(sizes)) {
    for (int64_t n : sizes_) {
      m_.emplace_back(static_cast<size_t>(n));
      v_.emplace_back(static_cast<size_t>(n));
    }
  }

  void Apply(absl::Span<const float* const> weights,
             absl::Span<const float* const> grads, absl::Span<float* const> out,
             double lr_scale) override {
    const double factor = NextFactor(lr_scale);
    ++step_;
    const AdamStep c =
        TensorFlowAdamStep(AdamHyper{options_.learning_rate, options_.beta1,
                                     options_.beta2, options_.epsilon},
                           step_, factor);
    ParallelForSpans(
        pool_, sizes_, kMinBulkPartFloats,
        [&](size_t k, int64_t begin, int64_t end) {
          const float* w = weights[k] + begin;
          float* o = out[k] + begin;
          if (grads[k] == nullptr) {  // no gradient: untouched, m and v too
            CopyUnchanged(end - begin, w, o);
            return;
          }
          AdamUpdate(end - begin, c, w, grads[k] + begin, m_[k].data() + begin,
                     v_[k].data() + begin, o);
        });
  }

  int64_t step() const override { return step_; }
  double NextRate(double lr_scale) const override {
    return options_.learning_rate * NextFactor(lr_scale);
  }

  absl::Span<const float> Slot(absl::string_view name,
                               int variable) const override {
    if (variable < 0 || variable >= static_cast<int>(sizes_.size())) return {};
    const AlignedBuffer* slot = name == "m"   ? &m_[variable]
                                : name == "v" ? &v_[variable]
                                              : nullptr;
    if (slot == nullptr) return {};
    return absl::MakeConstSpan(slot->data(), slot->size());
  }

  absl::string_view name() const override { return "adam"; }
  int64_t SlotBytes() const override { return BytesOf(m_) + BytesOf(v_); }

  OptimizerState SaveState() const override {
    OptimizerState s;
    s.kind = OptimizerOptions::Kind::kAdam;
    s.step = step_;
    s.slot_names = {"m", "v"};
    for (const std::vector<AlignedBuffer>* slot : {&m_, &v_}) {
      std::vector<std::vector<float>>& out = s.slots.emplace_back();
      for (const AlignedBuffer& b : *slot) {
        out.emplace_back(b.data(), b.data() + b.size());
      }
    }
    return s;
  }
  absl::Status LoadState(const OptimizerState& state) override {
    if (absl::Status s = CheckState(state, OptimizerOptions::Kind::kAdam,
                                    {"m", "v"}, sizes_);
        !s.ok()) {
      return s;
    }
    step_ = state.step;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      std::copy(state.slots[0][i].begin(), state.slots[0][i].end(),
                m_[i].data());
      std::copy(state.slots[1][i].begin(), state.slots[1][i].end(),
                v_[i].data());
    }
    return absl::OkStatus();
  }

 private:
  // The next Apply's factor of the learning rate: the schedule's at update
  // step() + 1 times lr_scale.
  double NextFactor(double lr_scale) const {
    return lr_scale * LrFactor(options_.schedule, step_ + 1);
  }

  ThreadPool* const pool_;  // not owned; null: the caller alone
  const OptimizerOptions options_;
  const std::vector<int64_t> sizes_;
  std::vector<AlignedBuffer> m_;
  std::vector<AlignedBuffer> v_;
  int64_t step_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerOptions& options, std::vector<int64_t> sizes,
    const std::vector<std::string>& variables, ThreadPool* pool) {
  if (!variables.empty() && variables.size() != sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: ", variables.size(), " names for ",
                     sizes.size(), " variables"));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: variable ", i, " has size ", sizes[i]));
    }
  }
  RETURN_IF_ERROR(ValidateOptimizerOptions(options, "optimizer option "));
  const bool adam = options.kind == OptimizerOptions::Kind::kAdam;
  if (!adam) {
    std::vector<float> decay(sizes.size(),
                             static_cast<float>(options.weight_decay));
    for (size_t i = 0; i < variables.size(); ++i) {
      for (const std::string& excluded : options.no_weight_decay) {
        if (variables[i] == excluded) decay[i] = 0;
      }
    }
    return std::unique_ptr<Optimizer>(
        new Sgd(options, std::move(sizes), std::move(decay), pool));
  }
  return std::unique_ptr<Optimizer>(new Adam(options, std::move(sizes), pool));
}

}  // namespace ps
}  // namespace psgd
