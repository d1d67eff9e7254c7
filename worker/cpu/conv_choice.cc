#include "worker/cpu/conv_choice.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

// 64-byte aligned floats, as the CPU backend's "device" memory.
struct Buffer {
  explicit Buffer(const Shape& shape, float value)
      : shape(shape), count(std::max<int64_t>(1, NumElements(shape))) {
    data = static_cast<float*>(
        std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64));
    std::fill(data, data + count, value);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  DeviceView view() { return DeviceView(data, shape); }
  ConstDeviceView cview() const { return ConstDeviceView(data, shape); }

  Shape shape;
  int64_t count;
  float* data;
};

}  // namespace

absl::StatusOr<double> TimeConvPasses(Conv2dOp* op) {
  const Conv2dShape& s = op->shape();
  // Values away from zero and denormals: the time does not depend on them.
  Buffer x(s.input(), 0.5f), w(s.filter(), 0.01f), b(s.bias(), 0.1f);
  Buffer y(s.output(), 0.0f), dy(s.output(), 0.25f), dx(s.input(), 0.0f);
  Buffer dw(s.filter(), 0.0f), db(s.bias(), 0.0f);
  double best = 0.0;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(op->Forward(x.cview(), w.cview(), b.cview(), y.view()));
    RETURN_IF_ERROR(op->BackwardData(dy.cview(), w.cview(), dx.view()));
    RETURN_IF_ERROR(
        op->BackwardFilter(x.cview(), dy.cview(), dw.view(), db.view()));
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (round == 1 || (round > 1 && ms < best)) best = ms;  // round 0: warm
  }
  return best;
}

std::optional<bool> ConvChooser::Cached(const std::string& key) const {
  MutexLock lock(&mu_);
  auto it = chosen_.find(key);
  if (it == chosen_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<bool> ConvChooser::Choose(const std::string& key,
                                         Conv2dOp* winograd, Conv2dOp* direct) {
  if (std::optional<bool> cached = Cached(key); cached.has_value()) {
    return *cached;
  }
  // Measured outside the lock (seconds for a large shape); two backends
  // that measure the same shape at once keep the first answer stored.
  ASSIGN_OR_RETURN(const double w_ms, measure_(winograd));
  ASSIGN_OR_RETURN(const double d_ms, measure_(direct));
  const bool use_winograd = w_ms < d_ms;
  MutexLock lock(&mu_);
  auto [it, inserted] = chosen_.emplace(key, use_winograd);
  if (inserted) {
    notes_.push_back(absl::StrFormat("%s: Winograd %.2f ms, direct %.2f ms: %s",
                                     key, w_ms, d_ms,
                                     use_winograd ? "Winograd" : "direct"));
  }
  return it->second;
}

std::vector<std::string> ConvChooser::Notes() const {
  MutexLock lock(&mu_);
  return notes_;
}

ConvChooser* ProcessConvChooser() {
  static ConvChooser* chooser = new ConvChooser(&TimeConvPasses);
  return chooser;
}

}  // namespace psgd
