// Convolution forward against a float64 reference, and both backward passes
// against central finite differences of that reference, for every CPU
// kernel choice and edge shapes (batch 1, odd sizes, even kernels, kernels
// larger than the image). Tolerance: relative error below 1e-4.
#include <catch2/catch.hpp>

#include "worker/backend/backend.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using testing::CompareGradient;
using testing::Download;
using testing::RandomValues;
using testing::ToDouble;
using testing::Unwrap;
using testing::Upload;
using testing::Zeros;

constexpr double kTolerance = 1e-4;

Conv2dShape Conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o,
                 int64_t kh, int64_t kw) {
  return Conv2dShape{n, c, h, w, o, kh, kw};
}

TEST_CASE("conv2d forward and backward match the float64 reference") {
  const std::vector<Conv2dShape> shapes = {
      Conv(1, 1, 1, 1, 1, 1, 1), Conv(1, 3, 5, 7, 4, 5, 5),
      Conv(2, 3, 6, 6, 5, 3, 3), Conv(2, 2, 5, 4, 3, 4, 4),
      Conv(3, 8, 3, 2, 6, 5, 5), Conv(2, 16, 6, 6, 16, 5, 5),
  };
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (const Conv2dShape& s : shapes) {
      INFO(name << " " << s.ToString());
      auto op = Unwrap(backend->CreateConv2d(s));
      const auto x = RandomValues(NumElements(s.input()), 1, -1, 1);
      const auto w = RandomValues(NumElements(s.filter()), 2, -0.5, 0.5);
      const auto b = RandomValues(NumElements(s.bias()), 3, -0.5, 0.5);
      const auto r = RandomValues(NumElements(s.output()), 4, -1, 1);
      DeviceTensor dx_ = Upload(backend.get(), x, s.input());
      DeviceTensor dw_ = Upload(backend.get(), w, s.filter());
      DeviceTensor db_ = Upload(backend.get(), b, s.bias());
      DeviceTensor dr_ = Upload(backend.get(), r, s.output());
      DeviceTensor y = Zeros(backend.get(), s.output());
      REQUIRE_OK(op->Forward(dx_.view(), dw_.view(), db_.view(), y.view()));
      const auto xd = ToDouble(x), wd = ToDouble(w), bd = ToDouble(b);
      CHECK(testing::MaxRelativeDifference(Download(backend.get(), y.view()),
                                           reference::Conv2d(s, xd, wd, bd)) <
            1e-5);

      DeviceTensor gx = Zeros(backend.get(), s.input());
      DeviceTensor gw = Zeros(backend.get(), s.filter());
      DeviceTensor gb = Zeros(backend.get(), s.bias());
      REQUIRE_OK(op->BackwardData(dr_.view(), dw_.view(), gx.view()));
      REQUIRE_OK(
          op->BackwardFilter(dx_.view(), dr_.view(), gw.view(), gb.view()));

      auto ex = CompareGradient(
          [&](const auto& v) {
            return testing::Dot(reference::Conv2d(s, v, wd, bd), r);
          },
          xd, Download(backend.get(), gx.view()));
      INFO("dx " << ex.ToString());
      CHECK(ex.relative() < kTolerance);
      auto ew = CompareGradient(
          [&](const auto& v) {
            return testing::Dot(reference::Conv2d(s, xd, v, bd), r);
          },
          wd, Download(backend.get(), gw.view()));
      INFO("dw " << ew.ToString());
      CHECK(ew.relative() < kTolerance);
      auto eb = CompareGradient(
          [&](const auto& v) {
            return testing::Dot(reference::Conv2d(s, xd, wd, v), r);
          },
          bd, Download(backend.get(), gb.view()));
      INFO("db " << eb.ToString());
      CHECK(eb.relative() < kTolerance);
    }
  }
}

TEST_CASE("conv2d refuses views of another shape and invalid plans") {
  auto backend = testing::MakeBackend("cpu");
  const Conv2dShape s = Conv(2, 3, 4, 4, 5, 3, 3);
  auto op = Unwrap(backend->CreateConv2d(s));
  DeviceTensor x = Zeros(backend.get(), s.input());
  DeviceTensor w = Zeros(backend.get(), s.filter());
  DeviceTensor b = Zeros(backend.get(), s.bias());
  DeviceTensor wrong = Zeros(backend.get(), {2, 5, 4, 3});
  absl::Status st = op->Forward(x.view(), w.view(), b.view(), wrong.view());
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(st.message().find("y: shape [2, 5, 4, 3]") != absl::string_view::npos);
  CHECK(backend->CreateConv2d(Conv(0, 3, 4, 4, 5, 3, 3)).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
