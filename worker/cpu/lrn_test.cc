// Local response normalisation against a float64 reference and finite
// differences: the tutorial's constants and others (a window wider than the
// channels, a single channel, beta other than 0.75). Tolerance: relative
// error below 1e-4.
#include <catch2/catch.hpp>

#include "worker/backend/backend.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using testing::Download;
using testing::Unwrap;
using testing::Upload;
using testing::Zeros;

LrnShape Lrn(int64_t n, int64_t c, int64_t h, int64_t w, LrnParams p = {}) {
  return LrnShape{n, c, h, w, p};
}

TEST_CASE("lrn forward and backward match the float64 reference") {
  // Large alpha makes the normalisation matter at unit-scale inputs.
  const LrnParams strong{2, 2.0f, 0.5f, 0.6f};
  const LrnParams tutorial_scaled{4, 1.0f, 0.05f, 0.75f};
  const std::vector<LrnShape> shapes = {
      Lrn(1, 1, 1, 1),
      Lrn(2, 64, 3, 3),
      Lrn(1, 3, 5, 7, tutorial_scaled),
      Lrn(2, 16, 4, 3, tutorial_scaled),
      Lrn(3, 5, 2, 2, strong),
      Lrn(1, 1, 3, 3, strong),
  };
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (const LrnShape& s : shapes) {
      INFO(name << " " << s.ToString());
      auto op = Unwrap(backend->CreateLrn(s));
      // The tutorial's LRN sees activations of tens; its alpha is tiny.
      const float scale = s.params.alpha < 0.01f ? 30.0f : 2.0f;
      const auto x =
          testing::RandomValues(NumElements(s.input()), 7, -scale, scale);
      const auto r = testing::RandomValues(NumElements(s.input()), 8, -1, 1);
      DeviceTensor dx = Upload(backend.get(), x, s.input());
      DeviceTensor dr = Upload(backend.get(), r, s.input());
      DeviceTensor y = Zeros(backend.get(), s.input());
      REQUIRE_OK(op->Forward(dx.view(), y.view()));
      const auto xd = testing::ToDouble(x);
      CHECK(testing::MaxRelativeDifference(Download(backend.get(), y.view()),
                                           reference::Lrn(s, xd)) < 1e-5);
      DeviceTensor gx = Zeros(backend.get(), s.input());
      REQUIRE_OK(op->Backward(dx.view(), y.view(), dr.view(), gx.view()));
      auto e = testing::CompareGradient(
          [&](const auto& v) { return testing::Dot(reference::Lrn(s, v), r); },
          xd, Download(backend.get(), gx.view()), 1e-3);
      INFO(e.ToString());
      CHECK(e.relative() < 1e-4);
    }
  }
}

TEST_CASE("lrn plans refuse invalid parameters") {
  auto backend = testing::MakeBackend("cpu");
  LrnParams bad;
  bad.bias = 0.0f;
  CHECK(backend->CreateLrn(Lrn(1, 2, 2, 2, bad)).status().code() ==
        absl::StatusCode::kInvalidArgument);
  bad = LrnParams();
  bad.depth_radius = -1;
  CHECK(backend->CreateLrn(Lrn(1, 2, 2, 2, bad)).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
