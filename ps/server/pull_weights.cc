#include "ps/server/pull_weights.h"

#include <utility>

#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {

// A snapshot's tensors in the wire dtype.
struct PullWeights::Encoded {
  ParameterShard::Snapshot snapshot;  // names and shapes borrowed from it
  WireEncoder encoder;                // owns the data
  std::vector<TensorBytes> tensors;
};

PullWeights::PullWeights(DType wire_weights) : dtype_(wire_weights) {}

PullWeights::~PullWeights() = default;

PullWeights::Tensors PullWeights::Get(const ParameterShard::Snapshot& snapshot,
                                      absl::Span<const int> selected) {
  Tensors out;
  const WeightsSnapshot& s = *snapshot;
  if (dtype_ == DType::kFloat32) {
    for (int i : selected) {
      out.tensors.push_back(FloatTensorBytes(
          s.layout->names[i], s.layout->shapes[i], s.weights[i].data()));
    }
    out.keep_alive = snapshot;
    return out;
  }
  std::shared_ptr<Encoded> e;
  {
    MutexLock lock(&mu_);
    if (current_ == nullptr || current_->snapshot != snapshot) {
      // Every copy of current_ is made under mu_: when the cache holds the
      // only one, no pull is sending it any more and its buffers are reused
      // (no fresh pages to fault in at every step).
      std::shared_ptr<Encoded> next = current_.use_count() == 1
                                          ? std::move(current_)
                                          : std::make_shared<Encoded>();
      next->snapshot = snapshot;
      std::vector<TensorBytes> floats;
      for (int i = 0; i < s.layout->size(); ++i) {
        floats.push_back(FloatTensorBytes(
            s.layout->names[i], s.layout->shapes[i], s.weights[i].data()));
      }
      absl::Span<const TensorBytes> encoded =
          next->encoder.FromFloat(floats, dtype_);
      next->tensors.assign(encoded.begin(), encoded.end());
      current_ = std::move(next);
    }
    e = current_;
  }
  for (int i : selected) out.tensors.push_back(e->tensors[i]);
  out.keep_alive = std::move(e);
  return out;
}

}  // namespace ps
}  // namespace psgd
