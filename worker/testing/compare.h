// The one comparison of a computed vector with its reference that the
// backend tests use (testing::RelativeError for the GPU tests,
// testing::MaxRelativeDifference for the CPU ones): the largest absolute
// difference relative to the largest reference value, where it is, and how
// many values are not finite.
//
// A NaN or an infinity on either side fails every tolerance: relative() is
// +inf then (a plain std::max over the differences would skip NaNs and let
// an all-NaN output pass).
//
// Comparison compares with a double (`CHECK(RelativeError(a, b) < 1e-4)`)
// and prints itself, so a failing Catch2 check shows the index and both
// values of the largest difference.
//
// Thread-safety: plain values and functions.
#ifndef PSGD_WORKER_TESTING_COMPARE_H_
#define PSGD_WORKER_TESTING_COMPARE_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/types/span.h"

namespace psgd {
namespace testing {

struct Comparison {
  int64_t size = 0;
  // max |got - want| over the finite pairs.
  double max_abs_diff = 0.0;
  // max |want| over the finite reference values (at least 1e-30).
  double scale = 1e-30;
  // The index of the largest difference (-1 when all are equal), or of the
  // first non-finite value when there is one; and both values there.
  int64_t index = -1;
  double got = 0.0;
  double want = 0.0;
  // Pairs where got or want is NaN or infinite.
  int64_t non_finite = 0;
  // Pairs with |got - want| > element_tolerance * scale (or not finite),
  // for the element_tolerance given to Compare.
  int64_t above = 0;
  double element_tolerance = 0.0;

  // max_abs_diff / scale; +inf when any value is not finite.
  double relative() const;
  // above / size (0 for empty vectors).
  double fraction_above() const;
  std::string ToString() const;
};

// Compares element-wise. got and want must have the same size (checked by
// the callers, which REQUIRE it). element_tolerance sets what `above`
// counts.
Comparison Compare(absl::Span<const float> got, absl::Span<const float> want,
                   double element_tolerance = 0.0);
Comparison Compare(absl::Span<const float> got, absl::Span<const double> want,
                   double element_tolerance = 0.0);

inline bool operator<(const Comparison& c, double tolerance) {
  return c.relative() < tolerance;
}
inline bool operator<=(const Comparison& c, double tolerance) {
  return c.relative() <= tolerance;
}
inline bool operator==(const Comparison& c, double value) {
  return c.relative() == value;
}
std::ostream& operator<<(std::ostream& os, const Comparison& c);

}  // namespace testing
}  // namespace psgd

#endif  // PSGD_WORKER_TESTING_COMPARE_H_
