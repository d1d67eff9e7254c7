#include "common/dtype_convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "catch2/catch.hpp"

namespace psgd {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

std::vector<ConvertPath> FastPaths() {
  std::vector<ConvertPath> out = {ConvertPath::kPortable};
  if (ConvertPathAvailable(ConvertPath::kAvx512)) {
    out.push_back(ConvertPath::kAvx512);
  }
  return out;
}

// Float bit patterns: a sweep of the whole space (a prime stride, so every
// exponent and many mantissas), and the special cases named one by one.
std::vector<float> FloatPatterns() {
  std::vector<uint32_t> bits;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4093) {
    bits.push_back(static_cast<uint32_t>(b));
  }
  const uint32_t special[] = {
      0x00000000, 0x80000000,  // +-0
      0x7f800000, 0xff800000,  // +-Inf
      0x7f800001, 0x7fc00000, 0x7fffffff, 0xffc00001, 0xff800001,
      0x7fa00000, 0x7f802000, 0x7f801fff, 0x7fbfffff,  // NaN payloads
      0x00000001, 0x007fffff, 0x80000001, 0x00400000,  // float denormals
      0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff,  // largest floats
      0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,  // bf16 ties
      0x3f801000, 0x3f803000, 0x3f801001, 0x3f800fff,  // half ties at 1
      0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001,  // half max / Inf
      0x38800000, 0x387fffff, 0x387fc000, 0x387fe000,  // half min normal
      0x33000000, 0x33000001, 0x33800000, 0x33c00000,  // half min subnormal
      0x33400000, 0x34200000, 0x34400000, 0x35000000,  // subnormal ties
      0x3f800000, 0xbf800000, 0x40490fdb, 0x3dcccccd};
  for (uint32_t b : special) bits.push_back(b);
  // Every float whose top 16 bits are any value and whose low 16 bits sit at
  // or around the bf16 rounding point.
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t lo : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      bits.push_back((hi << 16) | lo);
    }
  }
  // Half rounding points: each half's float plus / minus half an ulp.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t f = Bits(HalfToFloatRef(static_cast<uint16_t>(h)));
    for (uint32_t d : {0x0fffu, 0x1000u, 0x1001u}) {
      bits.push_back(f + d);
      bits.push_back(f - d);
    }
  }
  std::vector<float> out;
  for (uint32_t b : bits) out.push_back(FromBits(b));
  return out;
}

// Elements where got and want differ (as bits), the first few reported.
template <typename In, typename Out>
int64_t Differing(const std::vector<In>& in, const std::vector<Out>& got,
                  const std::vector<Out>& want) {
  auto bits = [](auto x) -> uint32_t {
    if constexpr (std::is_same_v<decltype(x), float>) {
      return Bits(x);
    } else {
      return x;
    }
  };
  int64_t differ = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (bits(got[i]) != bits(want[i]) && differ++ < 5) {
      UNSCOPED_INFO("input bits " << bits(in[i]) << ": " << bits(got[i])
                                  << " vs " << bits(want[i]));
    }
  }
  return differ;
}

TEST_CASE("reference: known values") {
  CHECK(FloatToBFloat16Ref(1.0f) == 0x3f80);
  CHECK(FloatToBFloat16Ref(-2.0f) == 0xc000);
  CHECK(FloatToBFloat16Ref(FromBits(0x3f808000)) == 0x3f80);  // tie, even
  CHECK(FloatToBFloat16Ref(FromBits(0x3f818000)) == 0x3f82);  // tie, up
  CHECK(FloatToBFloat16Ref(FromBits(0x3f808001)) == 0x3f81);
  CHECK(FloatToBFloat16Ref(FromBits(0x7f7fffff)) == 0x7f80);  // overflow
  CHECK(FloatToBFloat16Ref(FromBits(0x7f800001)) == 0x7fc0);  // sNaN quieted
  CHECK(FloatToBFloat16Ref(FromBits(0xffc12345)) == 0xffc1);
  CHECK(FloatToBFloat16Ref(FromBits(0x00000001)) == 0x0000);  // denormal
  CHECK(FloatToBFloat16Ref(FromBits(0x00018000)) == 0x0002);  // denormal tie
  CHECK(BFloat16ToFloatRef(0x3f80) == 1.0f);

  CHECK(FloatToHalfRef(1.0f) == 0x3c00);
  CHECK(FloatToHalfRef(-2.0f) == 0xc000);
  CHECK(FloatToHalfRef(65504.0f) == 0x7bff);
  CHECK(FloatToHalfRef(65519.0f) == 0x7bff);
  CHECK(FloatToHalfRef(65520.0f) == 0x7c00);  // tie to even: Inf
  CHECK(FloatToHalfRef(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(FloatToHalfRef(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(FloatToHalfRef(std::ldexp(1.0f, -24)) == 0x0001);  // min subnormal
  CHECK(FloatToHalfRef(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even 0
  CHECK(FloatToHalfRef(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(FloatToHalfRef(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 -> 2
  CHECK(FloatToHalfRef(std::ldexp(5.0f, -25)) == 0x0002);  // 2.5 -> 2
  CHECK(FloatToHalfRef(std::ldexp(1.0f, -14)) == 0x0400);  // min normal
  CHECK(FloatToHalfRef(FromBits(0x387fffff)) == 0x0400);   // rounds up to it
  CHECK(FloatToHalfRef(FromBits(0x7f800001)) == 0x7e00);   // sNaN quieted
  CHECK(FloatToHalfRef(FromBits(0xffc02000)) == 0xfe01);
  CHECK(HalfToFloatRef(0x3c00) == 1.0f);
  CHECK(HalfToFloatRef(0x0001) == std::ldexp(1.0f, -24));
  CHECK(HalfToFloatRef(0x83ff) == -std::ldexp(1023.0f, -24));
  CHECK(Bits(HalfToFloatRef(0x7c01)) == 0x7fc02000);  // quieted, payload kept
  CHECK(Bits(HalfToFloatRef(0xfe00)) == 0xffc00000);
}

TEST_CASE("reference: every non-NaN 16-bit value survives a round trip") {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const uint16_t h = static_cast<uint16_t>(v);
    const bool half_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (!half_nan) {
      INFO("half " << v);
      CHECK(FloatToHalfRef(HalfToFloatRef(h)) == h);
    }
    const bool bf16_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    if (!bf16_nan) {
      INFO("bfloat16 " << v);
      CHECK(FloatToBFloat16Ref(BFloat16ToFloatRef(h)) == h);
    } else {
      CHECK(std::isnan(BFloat16ToFloatRef(h)));
    }
  }
}

TEST_CASE("reference: rounds to the nearest (checked in double)") {
  for (float f : FloatPatterns()) {
    if (!std::isfinite(f)) continue;
    const double x = f;
    // bfloat16: the result is a nearest of the two neighbours.
    const uint16_t b = FloatToBFloat16Ref(f);
    const double got = BFloat16ToFloatRef(b);
    if (std::isfinite(got)) {
      const double other = BFloat16ToFloatRef(
          static_cast<uint16_t>(std::fabs(got) > std::fabs(x) ? b - 1 : b + 1));
      INFO("float bits " << Bits(f));
      CHECK(std::fabs(got - x) <= std::fabs(other - x));
    }
    const uint16_t h = FloatToHalfRef(f);
    const double hgot = HalfToFloatRef(h);
    if (std::isfinite(hgot) && (h & 0x7fff) != 0 && (h & 0x7fff) != 0x7bff) {
      const double lower = HalfToFloatRef(static_cast<uint16_t>(h - 1));
      const double upper = HalfToFloatRef(static_cast<uint16_t>(h + 1));
      INFO("float bits " << Bits(f));
      CHECK(std::fabs(hgot - x) <= std::fabs(lower - x));
      CHECK(std::fabs(hgot - x) <= std::fabs(upper - x));
    }
  }
}

TEST_CASE("fast paths: 16-bit -> float bit-identical for all 65536 values") {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t v = 0; v < 0x10000; ++v) all[v] = static_cast<uint16_t>(v);
  std::vector<float> want(all.size()), got(all.size());
  for (float inv_scale : {1.0f, 0.25f, 1024.0f}) {
    HalfToFloat(all.data(), all.size(), inv_scale, want.data(),
                ConvertPath::kReference);
    for (ConvertPath path : FastPaths()) {
      INFO(ConvertPathName(path) << " inv_scale " << inv_scale);
      HalfToFloat(all.data(), all.size(), inv_scale, got.data(), path);
      CHECK(Differing(all, got, want) == 0);
    }
  }
  BFloat16ToFloat(all.data(), all.size(), want.data(), ConvertPath::kReference);
  for (ConvertPath path : FastPaths()) {
    INFO(ConvertPathName(path));
    BFloat16ToFloat(all.data(), all.size(), got.data(), path);
    CHECK(std::memcmp(got.data(), want.data(), 4 * got.size()) == 0);
  }
}

TEST_CASE("fast paths: float -> 16-bit bit-identical on the sweep") {
  const std::vector<float> in = FloatPatterns();
  std::vector<uint16_t> want(in.size()), got(in.size());
  FloatToBFloat16(in.data(), in.size(), want.data(), ConvertPath::kReference);
  for (ConvertPath path : FastPaths()) {
    INFO(ConvertPathName(path) << " bfloat16");
    FloatToBFloat16(in.data(), in.size(), got.data(), path);
    CHECK(Differing(in, got, want) == 0);
  }
  for (float scale : {1.0f, 0.5f, 4096.0f}) {
    FloatToHalf(in.data(), in.size(), scale, want.data(),
                ConvertPath::kReference);
    for (ConvertPath path : FastPaths()) {
      INFO(ConvertPathName(path) << " float16 scale " << scale);
      FloatToHalf(in.data(), in.size(), scale, got.data(), path);
      CHECK(Differing(in, got, want) == 0);
    }
  }
}

TEST_CASE("fast paths: every length, so that the tails are covered") {
  std::vector<float> in(100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.37f * i - 11.0f;
  for (int64_t n = 0; n <= 100; ++n) {
    std::vector<uint16_t> want(n + 1, 0xabcd), got(n + 1, 0xabcd);
    std::vector<uint16_t> want_h(n + 1, 0xabcd), got_h(n + 1, 0xabcd);
    std::vector<float> want_f(n + 1, 7.0f), got_f(n + 1, 7.0f);
    FloatToBFloat16(in.data(), n, want.data(), ConvertPath::kReference);
    FloatToHalf(in.data(), n, 2.0f, want_h.data(), ConvertPath::kReference);
    HalfToFloat(want_h.data(), n, 0.5f, want_f.data(), ConvertPath::kReference);
    for (ConvertPath path : FastPaths()) {
      INFO(ConvertPathName(path) << " n " << n);
      FloatToBFloat16(in.data(), n, got.data(), path);
      FloatToHalf(in.data(), n, 2.0f, got_h.data(), path);
      HalfToFloat(want_h.data(), n, 0.5f, got_f.data(), path);
      // Including the untouched element past the end.
      CHECK(got == want);
      CHECK(got_h == want_h);
      CHECK(got_f == want_f);
    }
  }
}

TEST_CASE("float16 scale: small gradients keep their value") {
  std::vector<float> g = {1e-8f, -3e-9f, 2.5e-10f, 0.0f};
  const float scale = HalfScaleFor(g.data(), g.size());
  CHECK(scale == std::ldexp(1.0f, 15 + 26));  // 2^-27 <= 1e-8 < 2^-26
  std::vector<uint16_t> h(g.size());
  std::vector<float> back(g.size());
  FloatToHalf(g.data(), g.size(), scale, h.data());
  HalfToFloat(h.data(), h.size(), 1.0f / scale, back.data());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO(i);
    CHECK(std::fabs(back[i] - g[i]) <= std::fabs(g[i]) * 1e-3f);
  }
  // Without the scale they would flush to zero.
  CHECK(HalfToFloatRef(FloatToHalfRef(1e-8f)) == 0.0f);

  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> odd = {inf, std::nanf(""), 3.0f};
  CHECK(HalfScaleFor(odd.data(), odd.size()) == std::ldexp(1.0f, 13));
  std::vector<float> zeros(7, 0.0f);
  CHECK(HalfScaleFor(zeros.data(), zeros.size()) == 1.0f);
  std::vector<float> big = {1e30f};
  CHECK(HalfScaleFor(big.data(), 1) * 1e30f <= 32768.0f);
  std::vector<float> tiny = {1e-44f};
  CHECK(HalfScaleFor(tiny.data(), 1) == std::ldexp(1.0f, 127));
}

}  // namespace
}  // namespace psgd
