// The comparison helpers the backend tests rely on: a NaN or an infinity
// anywhere fails every tolerance, and the largest difference is located.
#include "worker/testing/compare.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "worker/testing/gradcheck.h"

namespace psgd {
namespace testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_CASE("equal and close vectors pass, far ones fail") {
  const std::vector<float> want = {1.0f, -2.0f, 4.0f, 0.5f};
  CHECK(Compare(want, want).relative() == 0.0);
  CHECK(Compare(want, want) < 1e-12);
  std::vector<float> got = want;
  got[1] = -2.0002f;  // 2e-4 off, scale 4: relative 5e-5
  CHECK(Compare(got, want) < 1e-4);
  CHECK_FALSE(Compare(got, want) < 1e-5);
}

TEST_CASE("all NaN against finite values fails") {
  const std::vector<float> want = {1.0f, 2.0f, 3.0f};
  const std::vector<float> got(3, kNaN);
  const Comparison c = Compare(got, want);
  CHECK(c.non_finite == 3);
  CHECK(c.index == 0);
  CHECK(std::isinf(c.relative()));
  CHECK_FALSE(c < 1e300);
}

TEST_CASE("one NaN among close values fails and is located") {
  std::vector<float> want(100, 1.0f), got(100, 1.0f);
  got[17] = 1.5f;  // the largest finite difference
  got[42] = kNaN;
  const Comparison c = Compare(got, want);
  CHECK(c.non_finite == 1);
  CHECK(c.index == 42);  // the non-finite one wins over the largest diff
  CHECK(c.max_abs_diff == Approx(0.5));
  CHECK_FALSE(c < 1.0);
}

TEST_CASE("an infinity on either side fails") {
  const std::vector<float> finite = {1.0f, 2.0f};
  const std::vector<float> inf = {1.0f, kInf};
  CHECK_FALSE(Compare(inf, finite) < 1e300);
  CHECK_FALSE(Compare(finite, inf) < 1e300);
  CHECK_FALSE(Compare(inf, inf) < 1e300);  // inf - inf is NaN, not 0
  const std::vector<double> want_nan = {1.0, std::nan("")};
  CHECK_FALSE(Compare(finite, want_nan) < 1e300);
}

TEST_CASE("the largest difference is reported with its index and values") {
  std::vector<float> want(10, 1.0f), got(10, 1.0f);
  got[3] = 1.001f;
  got[7] = 0.9f;
  const Comparison c = Compare(got, want);
  CHECK(c.index == 7);
  CHECK(c.got == Approx(0.9));
  CHECK(c.want == 1.0);
  CHECK(c.relative() == Approx(0.1).epsilon(1e-5));
  std::ostringstream os;
  os << c;
  CHECK_THAT(os.str(), Catch::Contains("index 7"));
  CHECK_THAT(os.str(), Catch::Contains("got 0.9"));
}

TEST_CASE("the element-wise count uses the reference's scale and counts NaNs") {
  const std::vector<float> want = {10.0f, 1.0f, 1.0f, 1.0f};
  // 1e-4 * 10 = 1e-3 allowed per element.
  const std::vector<float> got = {10.0f, 1.0005f, 1.01f, kNaN};
  const Comparison c = Compare(got, want, 1e-4);
  CHECK(c.above == 2);  // 1.01 and the NaN
  CHECK(c.fraction_above() == Approx(0.5));
}

TEST_CASE("the gradient check's helpers fail on NaN too") {
  CHECK_FALSE(MaxRelativeDifference({kNaN, kNaN}, {1.0, 2.0}) < 1e300);
  CHECK(MaxRelativeDifference({1.0f, 2.0f}, {1.0, 2.0}) < 1e-12);
  // f(x) = sum x^2: gradient 2x. An analytic gradient of NaNs must fail.
  const std::vector<double> x = {0.5, -1.0, 2.0};
  auto f = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e * e;
    return s;
  };
  const GradientError good = CompareGradient(f, x, {1.0f, -2.0f, 4.0f});
  CHECK(good.relative() < 1e-6);
  const GradientError bad = CompareGradient(f, x, {1.0f, kNaN, 4.0f});
  INFO(bad.ToString());
  CHECK(bad.worst_index == 1);
  CHECK_FALSE(bad.relative() < 1e300);
}

}  // namespace
}  // namespace testing
}  // namespace psgd
