#include "ps/wire/wire_dtype.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "common/dtype_convert.h"

namespace psgd {
namespace ps {
namespace {

bool Says(const absl::Status& s, const std::string& text) {
  return !s.ok() && std::string(s.message()).find(text) != std::string::npos;
}

const std::vector<int64_t> kShape = {2, 3};

TensorBytes Tensor16(const std::vector<uint16_t>& data, DType dtype) {
  return TensorBytes{
      "w/part_0", kShape, dtype,
      absl::string_view(reinterpret_cast<const char*>(data.data()),
                        data.size() * 2),
      std::nullopt};
}

TEST_CASE("CheckWireTensor refuses what does not fit the wire setting") {
  std::vector<uint16_t> six(6, 0x3f80), five(5, 0x3f80);
  TensorBytes bf = Tensor16(six, DType::kBFloat16);
  CHECK(CheckWireTensor(bf, DType::kBFloat16, "gradient").ok());
  CHECK(Says(CheckWireTensor(bf, DType::kFloat32, "gradient"),
             "gradient 'w/part_0' has dtype bfloat16, but the cluster's wire "
             "setting is float32"));
  CHECK(Says(CheckWireTensor(Tensor16(five, DType::kBFloat16), DType::kBFloat16,
                             "gradient"),
             "gradient 'w/part_0' of shape [2, 3] needs 12 bytes of bfloat16 "
             "but carries 10"));
  bf.scale = 2.0f;
  CHECK(Says(CheckWireTensor(bf, DType::kBFloat16, "gradient"),
             "only float16 tensors have one"));

  TensorBytes h = Tensor16(six, DType::kFloat16);
  CHECK(Says(CheckWireTensor(h, DType::kFloat16, "gradient"),
             "'w/part_0' of dtype float16 carries no scale"));
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    h.scale = bad;
    INFO(bad);
    CHECK(Says(CheckWireTensor(h, DType::kFloat16, "gradient"),
               "gradient 'w/part_0' of dtype float16 has scale"));
  }
  h.scale = 0.5f;
  CHECK(CheckWireTensor(h, DType::kFloat16, "gradient").ok());
  CHECK(Says(CheckWireTensor(h, DType::kBFloat16, "weight"),
             "weight 'w/part_0' has dtype float16"));

  std::vector<int64_t> bad_shape = {2, -3};
  TensorBytes negative{"w", bad_shape, DType::kBFloat16, {}, std::nullopt};
  CHECK(Says(CheckWireTensor(negative, DType::kBFloat16, "gradient"),
             "gradient 'w'"));
}

TEST_CASE("WireDecoder decodes nothing when one tensor is bad") {
  std::vector<uint16_t> six(6, 0x3f80), five(5, 0x3f80);
  std::vector<TensorBytes> in = {Tensor16(six, DType::kBFloat16),
                                 Tensor16(five, DType::kBFloat16)};
  in[1].name = "b";
  WireDecoder decoder;
  absl::StatusOr<absl::Span<const TensorBytes>> out =
      decoder.ToFloat(in, DType::kBFloat16, "gradient");
  CHECK(Says(out.status(), "gradient 'b'"));
  in.pop_back();
  out = decoder.ToFloat(in, DType::kBFloat16, "gradient");
  REQUIRE(out.ok());
  REQUIRE(out->size() == 1);
  CHECK((*out)[0].dtype == DType::kFloat32);
  CHECK((*out)[0].data.size() == 24);
  const float* f = reinterpret_cast<const float*>((*out)[0].data.data());
  for (int i = 0; i < 6; ++i) CHECK(f[i] == 1.0f);
}

TEST_CASE("float32 passes through both ways without a copy") {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<TensorBytes> in = {FloatTensorBytes("w", kShape, x.data())};
  WireEncoder encoder;
  absl::Span<const TensorBytes> e = encoder.FromFloat(in, DType::kFloat32);
  CHECK(e.data() == in.data());
  WireDecoder decoder;
  absl::StatusOr<absl::Span<const TensorBytes>> d =
      decoder.ToFloat(in, DType::kFloat32, "gradient");
  REQUIRE(d.ok());
  CHECK(d->data() == in.data());
}

TEST_CASE("bfloat16 and float16 round trips") {
  // Gradient-like values, from tiny to large.
  std::vector<float> x(6 * 1000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::ldexp(static_cast<float>(i % 7) - 3.3f,
                      -30 + static_cast<int>(i % 20));
  }
  const std::vector<int64_t> shape = {6, 1000};
  std::vector<TensorBytes> in = {FloatTensorBytes("g", shape, x.data())};
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    INFO(DTypeName(dtype));
    WireEncoder encoder;
    absl::Span<const TensorBytes> e = encoder.FromFloat(in, dtype);
    REQUIRE(e.size() == 1);
    CHECK(e[0].dtype == dtype);
    CHECK(e[0].data.size() == x.size() * 2);
    CHECK(e[0].scale.has_value() == (dtype == DType::kFloat16));
    WireDecoder decoder;
    absl::StatusOr<absl::Span<const TensorBytes>> d =
        decoder.ToFloat(e, dtype, "gradient");
    REQUIRE(d.ok());
    const float* back = reinterpret_cast<const float*>((*d)[0].data.data());
    // bfloat16 keeps 8 bits of mantissa; float16 11, but its 5-bit
    // exponent under the tensor's scale reaches only 2^-39 of the largest
    // element (2^-11 * 4.3 here): below that, absolute error.
    const float largest = std::ldexp(3.7f, -11);
    for (size_t i = 0; i < x.size(); ++i) {
      const float tolerance =
          dtype == DType::kBFloat16
              ? std::fabs(x[i]) * (1.0f / 256)
              : std::fabs(x[i]) * (1.0f / 2048) + largest * 0x1.0p-40f;
      if (!(std::fabs(back[i] - x[i]) <= tolerance)) {
        FAIL("element " << i << ": " << x[i] << " came back as " << back[i]);
      }
    }
  }
}

TEST_CASE("ParseWireDType") {
  CHECK(*ParseWireDType("bf16") == DType::kBFloat16);
  CHECK(*ParseWireDType("fp16") == DType::kFloat16);
  CHECK(*ParseWireDType("fp32") == DType::kFloat32);
  CHECK(Says(ParseWireDType("int8").status(), "wire dtype 'int8'"));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
