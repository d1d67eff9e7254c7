#include "common/dtype_convert.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace psgd {
namespace {

inline uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

inline float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// ---------------------------------------------------------------------------
// Portable, branch-free element functions (selects, no early returns), so
// that the loops below vectorise.

inline uint16_t FloatToBFloat16Portable(float f) {
  const uint32_t b = Bits(f);
  const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  const uint32_t nan = (b >> 16) | 0x40u;
  return static_cast<uint16_t>((b & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// After M. Maratyszcza's FP16 library (fp16_ieee_from_fp32_value): the
// rounding is done by float additions that align the mantissa at the
// half's precision; NaN as the reference says.
inline uint16_t FloatToHalfPortable(float f) {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = Bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xff000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = FromBits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = Bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
  const uint32_t mantissa_bits = bits & 0x00000fffu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  const uint32_t nan = 0x7e00u | ((w >> 13) & 0x3ffu);
  return static_cast<uint16_t>((sign >> 16) |
                               (shl1_w > 0xff000000u ? nan : nonsign));
}

// After fp16_ieee_to_fp32_value: normal values by an exponent shift and a
// multiplication, subnormals by a magic subtraction; Inf and NaN go through
// the multiplication (which quiets a signalling NaN).
inline float HalfToFloatPortable(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xe0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = FromBits((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = FromBits((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign |
      (two_w < denormalized_cutoff ? Bits(denormalized) : Bits(normalized));
  return FromBits(result);
}

// ---------------------------------------------------------------------------
// AVX-512F. Tails go through the portable element functions.

#if defined(__x86_64__) && defined(__GNUC__)
#define PSGD_HAVE_AVX512_PATH 1
// GCC 12 warns about _mm512_undefined_epi32() inside its own intrinsics at
// -O2 (GCC bug 105593), a false positive.
#pragma GCC diagnostic push
#if !defined( \
    __clang__)  // clang has no such warning (--config=tsa builds with it)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

__attribute__((target("avx512f"))) void FloatToBFloat16Avx512(const float* in,
                                                              int64_t n,
                                                              uint16_t* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i round = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i b = _mm512_loadu_si512(in + i);
    const __m512i hi = _mm512_srli_epi32(b, 16);
    const __m512i lsb = _mm512_and_si512(hi, one);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(b, round), lsb), 16);
    const __mmask16 is_nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, abs_mask), inf);
    const __m512i r =
        _mm512_mask_blend_epi32(is_nan, rounded, _mm512_or_si512(hi, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) out[i] = FloatToBFloat16Portable(in[i]);
}

__attribute__((target("avx512f"))) void BFloat16ToFloatAvx512(
    const uint16_t* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_si512(out + i,
                        _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  for (; i < n; ++i) out[i] = BFloat16ToFloatRef(in[i]);
}

__attribute__((target("avx512f"))) void FloatToHalfAvx512(const float* in,
                                                          int64_t n,
                                                          float scale,
                                                          uint16_t* out) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(in + i), s);
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + i),
        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) out[i] = FloatToHalfPortable(in[i] * scale);
}

__attribute__((target("avx512f"))) void HalfToFloatAvx512(const uint16_t* in,
                                                          int64_t n,
                                                          float inv_scale,
                                                          float* out) {
  const __m512 s = _mm512_set1_ps(inv_scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtph_ps(h), s));
  }
  for (; i < n; ++i) out[i] = HalfToFloatPortable(in[i]) * inv_scale;
}
#pragma GCC diagnostic pop
#endif

ConvertPath Resolve(ConvertPath path) {
  if (path == ConvertPath::kBest) return BestConvertPath();
  if (!ConvertPathAvailable(path)) return ConvertPath::kPortable;
  return path;
}

}  // namespace

uint16_t FloatToBFloat16Ref(float f) {
  const uint32_t b = Bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((b >> 16) | 0x40u);  // quiet NaN
  }
  // Round to nearest even at bit 16; a carry into the exponent is right
  // (and turns the largest values into Inf).
  const uint32_t lsb = (b >> 16) & 1u;
  return static_cast<uint16_t>((b + 0x7fffu + lsb) >> 16);
}

float BFloat16ToFloatRef(uint16_t b) {
  return FromBits(static_cast<uint32_t>(b) << 16);
}

uint16_t FloatToHalfRef(float f) {
  const uint32_t b = Bits(f);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN: quiet, top 9 payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 (halfway between 65504, the largest half, and 65536) and above
  // round to Inf: 65504's last mantissa bit is odd.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // 2^-14 and above: a normal half
    const uint32_t lsb = (a >> 13) & 1u;
    const uint32_t rounded = a + 0xfffu + lsb - (112u << 23);  // rebias
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // A half subnormal (or zero): round(|f| / 2^-24). At 2^-25 and below the
  // result is 0 (2^-25 itself is a tie, to the even 0).
  if (a <= 0x33000000u) return sign;
  const uint32_t e = a >> 23;  // 102 .. 112
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  // |f| = m * 2^(e - 150), so |f| / 2^-24 = m / 2^(126 - e).
  const uint32_t shift = 126 - e;
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);  // q may reach 0x400: 2^-14
}

float HalfToFloatRef(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) {  // Inf, or NaN (quieted)
    return FromBits(sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x400000u : 0));
  }
  if (e == 0) {
    if (m == 0) return FromBits(sign);
    // Subnormal m * 2^-24: normalise.
    e = 1;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    m &= 0x3ffu;
  }
  return FromBits(sign | ((e + 112) << 23) | (m << 13));
}

bool ConvertPathAvailable(ConvertPath path) {
  switch (path) {
    case ConvertPath::kBest:
    case ConvertPath::kReference:
    case ConvertPath::kPortable:
      return true;
    case ConvertPath::kAvx512:
#ifdef PSGD_HAVE_AVX512_PATH
      return __builtin_cpu_supports("avx512f");
#else
      return false;
#endif
  }
  return false;
}

ConvertPath BestConvertPath() {
  static const ConvertPath best = ConvertPathAvailable(ConvertPath::kAvx512)
                                      ? ConvertPath::kAvx512
                                      : ConvertPath::kPortable;
  return best;
}

absl::string_view ConvertPathName(ConvertPath path) {
  switch (path) {
    case ConvertPath::kBest:
      return "best";
    case ConvertPath::kReference:
      return "reference";
    case ConvertPath::kPortable:
      return "portable";
    case ConvertPath::kAvx512:
      return "avx512";
  }
  return "?";
}

void FloatToBFloat16(const float* in, int64_t n, uint16_t* out,
                     ConvertPath path) {
  switch (Resolve(path)) {
    case ConvertPath::kReference:
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToBFloat16Ref(in[i]);
      return;
#ifdef PSGD_HAVE_AVX512_PATH
    case ConvertPath::kAvx512:
      FloatToBFloat16Avx512(in, n, out);
      return;
#endif
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToBFloat16Portable(in[i]);
  }
}

void BFloat16ToFloat(const uint16_t* in, int64_t n, float* out,
                     ConvertPath path) {
  switch (Resolve(path)) {
    case ConvertPath::kReference:
      for (int64_t i = 0; i < n; ++i) out[i] = BFloat16ToFloatRef(in[i]);
      return;
#ifdef PSGD_HAVE_AVX512_PATH
    case ConvertPath::kAvx512:
      BFloat16ToFloatAvx512(in, n, out);
      return;
#endif
    default:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = FromBits(static_cast<uint32_t>(in[i]) << 16);
      }
  }
}

void FloatToHalf(const float* in, int64_t n, float scale, uint16_t* out,
                 ConvertPath path) {
  switch (Resolve(path)) {
    case ConvertPath::kReference:
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalfRef(in[i] * scale);
      return;
#ifdef PSGD_HAVE_AVX512_PATH
    case ConvertPath::kAvx512:
      FloatToHalfAvx512(in, n, scale, out);
      return;
#endif
    default:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = FloatToHalfPortable(in[i] * scale);
      }
  }
}

void HalfToFloat(const uint16_t* in, int64_t n, float inv_scale, float* out,
                 ConvertPath path) {
  switch (Resolve(path)) {
    case ConvertPath::kReference:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = HalfToFloatRef(in[i]) * inv_scale;
      }
      return;
#ifdef PSGD_HAVE_AVX512_PATH
    case ConvertPath::kAvx512:
      HalfToFloatAvx512(in, n, inv_scale, out);
      return;
#endif
    default:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = HalfToFloatPortable(in[i]) * inv_scale;
      }
  }
}

float HalfScaleFor(const float* in, int64_t n) {
  float max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(in[i]);
    // NaN compares false; Inf is left out by the second test.
    max_abs = (a > max_abs && a <= 3.4028235e38f) ? a : max_abs;
  }
  if (max_abs == 0) return 1.0f;
  int e;
  std::frexp(max_abs, &e);  // max_abs < 2^e
  int k = 15 - e;
  if (k < -126) k = -126;
  if (k > 127) k = 127;
  return std::ldexp(1.0f, k);
}

}  // namespace psgd
