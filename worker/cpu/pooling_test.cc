// Max pooling (SAME) against a float64 reference and finite differences, on
// edge shapes. Inputs are distinct values, so that no window has a near-tie
// that a finite-difference step could flip. Tolerance: relative error below
// 1e-4.
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

TEST_CASE("SAME padding puts the odd element after, as TensorFlow") {
  SamePadding p = ComputeSamePadding(24, 3, 2);
  CHECK(p.output == 12);
  CHECK(p.before == 0);
  CHECK(p.after == 1);
  p = ComputeSamePadding(12, 3, 2);
  CHECK((p.output == 6 && p.before == 0 && p.after == 1));
  p = ComputeSamePadding(24, 5, 1);
  CHECK((p.output == 24 && p.before == 2 && p.after == 2));
  p = ComputeSamePadding(5, 4, 1);
  CHECK((p.output == 5 && p.before == 1 && p.after == 2));
  p = ComputeSamePadding(7, 3, 2);
  CHECK((p.output == 4 && p.before == 1 && p.after == 1));
  p = ComputeSamePadding(1, 3, 2);
  CHECK((p.output == 1 && p.before == 1 && p.after == 1));
}

TEST_CASE("max pool forward and backward match the float64 reference") {
  const std::vector<PoolShape> shapes = {
      {1, 1, 1, 1, 3, 2},   {1, 2, 5, 7, 3, 2}, {2, 3, 24, 24, 3, 2},
      {3, 4, 12, 12, 3, 2}, {2, 2, 6, 5, 2, 2}, {1, 3, 4, 4, 3, 1},
  };
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (const PoolShape& s : shapes) {
      INFO(name << " " << s.ToString());
      auto op = Unwrap(backend->CreateMaxPool(s));
      const auto x = testing::DistinctValues(NumElements(s.input()), 5, -2, 2);
      const auto r = testing::RandomValues(NumElements(s.output()), 6, -1, 1);
      DeviceTensor dx = Upload(backend.get(), x, s.input());
      DeviceTensor dr = Upload(backend.get(), r, s.output());
      DeviceTensor y = Zeros(backend.get(), s.output());
      REQUIRE_OK(op->Forward(dx.view(), y.view()));
      const auto xd = testing::ToDouble(x);
      CHECK(testing::MaxRelativeDifference(Download(backend.get(), y.view()),
                                           reference::MaxPool(s, xd)) == 0.0);
      DeviceTensor gx = Zeros(backend.get(), s.input());
      REQUIRE_OK(op->Backward(dx.view(), y.view(), dr.view(), gx.view()));
      auto e = testing::CompareGradient(
          [&](const auto& v) {
            return testing::Dot(reference::MaxPool(s, v), r);
          },
          xd, Download(backend.get(), gx.view()), 1e-5);
      INFO(e.ToString());
      CHECK(e.relative() < 1e-4);
    }
  }
}

TEST_CASE("max pool sends a tie's gradient to the first maximum") {
  auto backend = testing::MakeBackend("cpu");
  const PoolShape s{1, 1, 2, 2, 2, 2};
  auto op = Unwrap(backend->CreateMaxPool(s));
  DeviceTensor x = Upload(backend.get(), {1, 3, 3, 0}, s.input());
  DeviceTensor y = Zeros(backend.get(), s.output());
  DeviceTensor dy = Upload(backend.get(), {2}, s.output());
  DeviceTensor dx = Zeros(backend.get(), s.input());
  REQUIRE_OK(op->Forward(x.view(), y.view()));
  REQUIRE_OK(op->Backward(x.view(), y.view(), dy.view(), dx.view()));
  CHECK(Download(backend.get(), dx.view()) == std::vector<float>{0, 2, 0, 0});
}

}  // namespace
}  // namespace psgd
