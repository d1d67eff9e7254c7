// The fully connected layer against a float64 reference and finite
// differences, for every GEMM library. Tolerance: relative error below 1e-4.
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

TEST_CASE("dense forward and backward match the float64 reference") {
  const std::vector<DenseShape> shapes = {
      {1, 1, 1}, {1, 7, 3}, {5, 13, 9}, {16, 64, 10}, {3, 200, 33},
  };
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (const DenseShape& s : shapes) {
      INFO(name << " " << s.ToString());
      auto op = Unwrap(backend->CreateDense(s));
      const auto x = RandomValues(NumElements(s.input()), 11, -1, 1);
      const auto w = RandomValues(NumElements(s.weights()), 12, -0.5, 0.5);
      const auto b = RandomValues(NumElements(s.bias()), 13, -0.5, 0.5);
      const auto r = RandomValues(NumElements(s.output()), 14, -1, 1);
      DeviceTensor dx = Upload(backend.get(), x, s.input());
      DeviceTensor dw = Upload(backend.get(), w, s.weights());
      DeviceTensor db = Upload(backend.get(), b, s.bias());
      DeviceTensor dr = Upload(backend.get(), r, s.output());
      DeviceTensor y = Zeros(backend.get(), s.output());
      REQUIRE_OK(op->Forward(dx.view(), dw.view(), db.view(), y.view()));
      const auto xd = ToDouble(x), wd = ToDouble(w), bd = ToDouble(b);
      CHECK(testing::MaxRelativeDifference(Download(backend.get(), y.view()),
                                           reference::Dense(s, xd, wd, bd)) <
            1e-5);
      DeviceTensor gx = Zeros(backend.get(), s.input());
      DeviceTensor gw = Zeros(backend.get(), s.weights());
      DeviceTensor gb = Zeros(backend.get(), s.bias());
      REQUIRE_OK(op->BackwardData(dr.view(), dw.view(), gx.view()));
      REQUIRE_OK(
          op->BackwardWeights(dx.view(), dr.view(), gw.view(), gb.view()));
      auto ex = CompareGradient(
          [&](const auto& v) {
            return testing::Dot(reference::Dense(s, v, wd, bd), r);
          },
          xd, Download(backend.get(), gx.view()));
      INFO("dx " << ex.ToString());
      CHECK(ex.relative() < 1e-4);
      auto ew = CompareGradient(
          [&](const auto& v) {
            return testing::Dot(reference::Dense(s, xd, v, bd), r);
          },
          wd, Download(backend.get(), gw.view()));
      INFO("dw " << ew.ToString());
      CHECK(ew.relative() < 1e-4);
      auto eb = CompareGradient(
          [&](const auto& v) {
            return testing::Dot(reference::Dense(s, xd, wd, v), r);
          },
          bd, Download(backend.get(), gb.view()));
      INFO("db " << eb.ToString());
      CHECK(eb.relative() < 1e-4);
    }
  }
}

}  // namespace
}  // namespace psgd
