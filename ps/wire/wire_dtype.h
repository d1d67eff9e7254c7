// Tensors on the wire in the cluster's wire dtype (docs/PS.md, "Wire
// dtypes"): float32 tensors encoded as bfloat16 or float16 for sending, and
// received tensors checked against the dtype the cluster expects and
// decoded to float32. Plain C++ over TensorBytes (no proto, no network);
// the conversions are common/dtype_convert.h's.
//
// Thread-safety: CheckWireTensor is a pure function; a WireDecoder or
// WireEncoder is used by one thread at a time (it owns the buffers that
// the tensors it returns borrow).
#ifndef PSGD_PS_WIRE_WIRE_DTYPE_H_
#define PSGD_PS_WIRE_WIRE_DTYPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/cluster_config.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// "fp32", "bf16" or "fp16" (in any case; ps_bench's --wire) to a dtype;
// INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<DType> ParseWireDType(absl::string_view name);

// The cluster config's `wire` block (default float32 both ways).
struct WireDTypes {
  DType gradients = DType::kFloat32;
  DType weights = DType::kFloat32;
};
WireDTypes WireDTypesFromConfig(const ClusterConfig& config);

// OK when `t` may be decoded as a tensor of dtype `expected`: its dtype is
// `expected`; for bfloat16 and float16 a valid shape and exactly
// product(shape) * 2 bytes of data; for float16 a scale that is finite and
// > 0; no scale on the other dtypes. INVALID_ARGUMENT naming `what` (e.g.
// "gradient"), the tensor and what is wrong. (The float32 byte count and
// the values are the shard's to check: ps/state/variable_store.h.)
absl::Status CheckWireTensor(const TensorBytes& t, DType expected,
                             absl::string_view what);

// Received tensors as float32.
class WireDecoder {
 public:
  // CheckWireTensor on every tensor, then the float32 tensors: `in` itself
  // (borrowed, no copy) when `expected` is float32, else conversions into
  // this decoder's buffers, valid until the next call. Nothing is decoded
  // when a tensor fails the check.
  absl::StatusOr<absl::Span<const TensorBytes>> ToFloat(
      absl::Span<const TensorBytes> in, DType expected, absl::string_view what);

 private:
  std::vector<std::vector<float>> buffers_;
  std::vector<TensorBytes> out_;
};

// Writes a bfloat16 or float16 tensor's elements, as float32, to `out`
// (product(shape) floats). Requires CheckWireTensor(t, t.dtype) to be OK
// and t.dtype to be 16-bit.
void DecodeWireTensor(const TensorBytes& t, float* out);

// float32 tensors in a wire dtype, for sending.
class WireEncoder {
 public:
  // `in` (float32, borrowed) as `dtype`: for float32 `in` itself; else
  // conversions into this encoder's buffers, valid until the next call
  // (float16 with its scale, common/dtype_convert.h's HalfScaleFor).
  absl::Span<const TensorBytes> FromFloat(absl::Span<const TensorBytes> in,
                                          DType dtype);

 private:
  std::vector<std::vector<uint16_t>> buffers_;
  std::vector<TensorBytes> out_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_WIRE_DTYPE_H_
