// float32 <-> bfloat16 and float32 <-> float16 (IEEE binary16), for tensors
// on the wire (docs/PS.md, "Wire dtypes").
//
// Rounding is to nearest, ties to even, in every direction that rounds;
// overflow gives +-Inf. NaN stays NaN with its sign: float -> bfloat16 keeps
// the top 7 payload bits and sets the quiet bit; float -> float16 keeps the
// top 9 and sets the quiet bit; float16 -> float quiets (sets bit 22) and
// keeps the payload; bfloat16 -> float is exact (a shift, payload as is).
// Denormals are converted exactly (no flush to zero) in both formats.
//
// Three paths compute the same bits: the scalar reference (the *Ref
// functions, written for reading), a portable branch-free loop (any CPU) and
// AVX-512 (chosen at run time when the CPU has AVX-512F).
// common/dtype_convert_test.cc checks the two fast paths against the
// reference on all 65536 16-bit values and a sweep of float bit patterns.
//
// float16 carries a per-tensor scale so that small gradients do not flush to
// zero: a tensor x is sent as h = half(x * scale) and read as
// float(h) * (1 / scale). HalfScaleFor picks a power of two, for which
// both multiplications are exact.
//
// Thread-safety: pure functions.
#ifndef PSGD_COMMON_DTYPE_CONVERT_H_
#define PSGD_COMMON_DTYPE_CONVERT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace psgd {

// The scalar reference.
uint16_t FloatToBFloat16Ref(float f);
float BFloat16ToFloatRef(uint16_t b);
uint16_t FloatToHalfRef(float f);
float HalfToFloatRef(uint16_t h);

enum class ConvertPath {
  kBest,       // AVX-512 when the CPU has it, else portable
  kReference,  // the *Ref functions, element by element
  kPortable,   // branch-free loops the compiler may vectorise
  kAvx512,     // AVX-512F intrinsics; only where ConvertPathAvailable
};

// Whether `path` runs on this CPU (kAvx512: AVX-512F).
bool ConvertPathAvailable(ConvertPath path);
// What kBest resolves to here.
ConvertPath BestConvertPath();
// "best", "reference", "portable", "avx512".
absl::string_view ConvertPathName(ConvertPath path);

// n elements; `in` and `out` must not overlap. A path that is not available
// here (ConvertPathAvailable) falls back to kPortable.
//   out[i] = bfloat16(in[i])
void FloatToBFloat16(const float* in, int64_t n, uint16_t* out,
                     ConvertPath path = ConvertPath::kBest);
//   out[i] = float(in[i])
void BFloat16ToFloat(const uint16_t* in, int64_t n, float* out,
                     ConvertPath path = ConvertPath::kBest);
//   out[i] = half(in[i] * scale)
void FloatToHalf(const float* in, int64_t n, float scale, uint16_t* out,
                 ConvertPath path = ConvertPath::kBest);
//   out[i] = float(in[i]) * inv_scale
void HalfToFloat(const uint16_t* in, int64_t n, float inv_scale, float* out,
                 ConvertPath path = ConvertPath::kBest);

// The largest power of two s in [2^-126, 2^127] with max|x| * s <= 2^15
// over the finite elements of in[0, n) (1 when there is none or all are
// zero): the float16 scale of a tensor. Values at 2^15 and below stay
// finite in float16 (max 65504), and a tensor's small elements keep about
// 2^-39 of its largest.
float HalfScaleFor(const float* in, int64_t n);

}  // namespace psgd

#endif  // PSGD_COMMON_DTYPE_CONVERT_H_
