#include "ps/wire/wire_dtype.h"

#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/dtype_convert.h"
#include "common/tensor.h"

namespace psgd {
namespace ps {

absl::StatusOr<DType> ParseWireDType(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "fp32") return DType::kFloat32;
  if (lower == "bf16") return DType::kBFloat16;
  if (lower == "fp16") return DType::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("wire dtype '", name, "': expected fp32, bf16 or fp16"));
}

namespace {

DType FromConfig(config::WireConfig::DType d) {
  switch (d) {
    case config::WireConfig::FP32:
      return DType::kFloat32;
    case config::WireConfig::BF16:
      return DType::kBFloat16;
    case config::WireConfig::FP16:
      return DType::kFloat16;
  }
  return DType::kFloat32;  // proto2 enums hold only their values
}

}  // namespace

WireDTypes WireDTypesFromConfig(const ClusterConfig& config) {
  return WireDTypes{FromConfig(config.wire().gradients()),
                    FromConfig(config.wire().weights())};
}

absl::Status CheckWireTensor(const TensorBytes& t, DType expected,
                             absl::string_view what) {
  if (t.dtype != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", t.name, "' has dtype ", DTypeName(t.dtype),
        ", but the cluster's wire setting is ", DTypeName(expected)));
  }
  if (t.dtype != DType::kFloat16) {
    if (t.scale.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " '", t.name, "' of dtype ", DTypeName(t.dtype),
          " carries a scale (", *t.scale, "); only float16 tensors have one"));
    }
  } else if (!t.scale.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", t.name, "' of dtype float16 carries no scale"));
  } else if (!std::isfinite(*t.scale) || !(*t.scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", t.name, "' of dtype float16 has scale ",
                     *t.scale, "; it must be finite and > 0"));
  }
  if (t.dtype == DType::kFloat32) return absl::OkStatus();
  const Shape shape(t.shape.begin(), t.shape.end());
  if (absl::Status s = ValidateShape(shape); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", t.name, "': ", s.message()));
  }
  const int64_t want = NumElements(shape) * DTypeSize(t.dtype);
  if (static_cast<int64_t>(t.data.size()) != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", t.name, "' of shape ", ShapeToString(shape),
                     " needs ", want, " bytes of ", DTypeName(t.dtype),
                     " but carries ", t.data.size()));
  }
  return absl::OkStatus();
}

void DecodeWireTensor(const TensorBytes& t, float* out) {
  const int64_t n = static_cast<int64_t>(t.data.size()) / 2;
  // A message's bytes may sit at an odd address: then read an aligned copy.
  std::vector<uint16_t> aligned;
  const uint16_t* in = reinterpret_cast<const uint16_t*>(t.data.data());
  if (reinterpret_cast<uintptr_t>(t.data.data()) % alignof(uint16_t) != 0) {
    aligned.resize(n);
    std::memcpy(aligned.data(), t.data.data(), n * 2);
    in = aligned.data();
  }
  if (t.dtype == DType::kBFloat16) {
    BFloat16ToFloat(in, n, out);
  } else {
    HalfToFloat(in, n, 1.0f / *t.scale, out);
  }
}

absl::StatusOr<absl::Span<const TensorBytes>> WireDecoder::ToFloat(
    absl::Span<const TensorBytes> in, DType expected, absl::string_view what) {
  for (const TensorBytes& t : in) {
    // A marker without a gradient has no data to check or convert (the
    // shard checks its name and shape).
    if (t.no_gradient) continue;
    if (absl::Status s = CheckWireTensor(t, expected, what); !s.ok()) return s;
  }
  if (expected == DType::kFloat32) return in;
  if (buffers_.size() < in.size()) buffers_.resize(in.size());
  out_.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorBytes& t = in[i];
    if (t.no_gradient) {
      out_.push_back(t);
      out_.back().dtype = DType::kFloat32;
      continue;
    }
    const size_t n = t.data.size() / 2;
    std::vector<float>& buffer = buffers_[i];
    buffer.resize(n);
    DecodeWireTensor(t, buffer.data());
    out_.push_back(TensorBytes{
        t.name, t.shape, DType::kFloat32,
        absl::string_view(reinterpret_cast<const char*>(buffer.data()),
                          n * sizeof(float)),
        std::nullopt});
  }
  return absl::MakeConstSpan(out_);
}

absl::Span<const TensorBytes> WireEncoder::FromFloat(
    absl::Span<const TensorBytes> in, DType dtype) {
  if (dtype == DType::kFloat32) return in;
  if (buffers_.size() < in.size()) buffers_.resize(in.size());
  out_.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorBytes& t = in[i];
    if (t.no_gradient) {
      out_.push_back(t);
      out_.back().dtype = dtype;
      continue;
    }
    const float* x = reinterpret_cast<const float*>(t.data.data());
    const int64_t n = static_cast<int64_t>(t.data.size() / sizeof(float));
    std::vector<uint16_t>& buffer = buffers_[i];
    buffer.resize(n);
    TensorBytes& e = out_.emplace_back(TensorBytes{
        t.name, t.shape, dtype,
        absl::string_view(reinterpret_cast<const char*>(buffer.data()), n * 2),
        std::nullopt});
    if (dtype == DType::kBFloat16) {
      FloatToBFloat16(x, n, buffer.data());
    } else {
      const float scale = HalfScaleFor(x, n);
      FloatToHalf(x, n, scale, buffer.data());
      e.scale = scale;
    }
  }
  return absl::MakeConstSpan(out_);
}

}  // namespace ps
}  // namespace psgd
