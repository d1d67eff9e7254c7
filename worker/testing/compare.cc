#include "worker/testing/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace testing {
namespace {

template <typename Want>
Comparison CompareImpl(absl::Span<const float> got, absl::Span<const Want> want,
                       double element_tolerance) {
  Comparison c;
  c.size = static_cast<int64_t>(got.size());
  c.element_tolerance = element_tolerance;
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], w = static_cast<double>(want[i]);
    if (!std::isfinite(g) || !std::isfinite(w)) {
      if (c.non_finite++ == 0) {
        c.index = static_cast<int64_t>(i);
        c.got = g;
        c.want = w;
      }
      continue;
    }
    c.scale = std::max(c.scale, std::abs(w));
    const double d = std::abs(g - w);
    if (d > c.max_abs_diff) {
      c.max_abs_diff = d;
      if (c.non_finite == 0) {
        c.index = static_cast<int64_t>(i);
        c.got = g;
        c.want = w;
      }
    }
  }
  const double limit = element_tolerance * c.scale;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], w = static_cast<double>(want[i]);
    // Written so that a NaN difference counts.
    if (!(std::abs(g - w) <= limit)) ++c.above;
  }
  return c;
}

}  // namespace

double Comparison::relative() const {
  if (non_finite > 0) return std::numeric_limits<double>::infinity();
  return max_abs_diff / scale;
}

double Comparison::fraction_above() const {
  return size == 0 ? 0.0 : static_cast<double>(above) / size;
}

std::string Comparison::ToString() const {
  std::string s =
      absl::StrCat("relative ", relative(), " (max |diff| ", max_abs_diff,
                   " / max |want| ", scale, ") over ", size, " values");
  if (non_finite > 0) {
    absl::StrAppend(&s, "; ", non_finite, " not finite, the first at index ",
                    index, ": got ", got, ", want ", want);
  } else if (index >= 0) {
    absl::StrAppend(&s, "; largest at index ", index, ": got ", got, ", want ",
                    want);
  }
  if (element_tolerance > 0) {
    absl::StrAppend(&s, "; ", above, " (", fraction_above(),
                    ") differ by more than ", element_tolerance,
                    " * max |want|");
  }
  return s;
}

Comparison Compare(absl::Span<const float> got, absl::Span<const float> want,
                   double element_tolerance) {
  return CompareImpl(got, want, element_tolerance);
}

Comparison Compare(absl::Span<const float> got, absl::Span<const double> want,
                   double element_tolerance) {
  return CompareImpl(got, want, element_tolerance);
}

std::ostream& operator<<(std::ostream& os, const Comparison& c) {
  return os << "{" << c.ToString() << "}";
}

}  // namespace testing
}  // namespace psgd
