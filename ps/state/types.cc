#include "ps/state/types.h"

namespace psgd {
namespace ps {

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "unknown";
}

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
  }
  return 0;
}

TensorBytes FloatTensorBytes(absl::string_view name,
                             absl::Span<const int64_t> shape,
                             const float* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return TensorBytes{name, shape, DType::kFloat32,
                     absl::string_view(reinterpret_cast<const char*>(data),
                                       static_cast<size_t>(n) * sizeof(float)),
                     std::nullopt};
}

absl::string_view PushOutcomeName(PushOutcome outcome) {
  switch (outcome) {
    case PushOutcome::kAggregated:
      return "aggregated";
    case PushOutcome::kApplied:
      return "applied";
    case PushOutcome::kDroppedStale:
      return "dropped_stale";
    case PushOutcome::kDroppedSurplus:
      return "dropped_surplus";
  }
  return "unknown";
}

}  // namespace ps
}  // namespace psgd
