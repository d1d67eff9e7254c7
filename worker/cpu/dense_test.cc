// The fully connected layer against a float64 reference and finite
// differences, for every GEMM library. Tolerance: relative error below 1e-4.
#include <catch2/catch.hpp>

#include "worker/backend/backend.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using testing::Unwrap;

TEST_CASE("dense forward and backward match the float64 reference") {
  const std::vector<DenseShape> shapes = {
      {1, 1, 1}, {1, 7, 3}, {5, 13, 9}, {16, 64, 10}, {3, 200, 33},
  };
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (const DenseShape& s : shapes) {
      INFO(name << " " << s.ToString());
      auto op = Unwrap(backend->CreateDense(s));
      testing::CheckWeightedLayer(
          backend.get(),
          {s.input(), s.weights(), s.bias(), s.output(),
           [&](auto x, auto w, auto b, auto y) {
             return op->Forward(x, w, b, y);
           },
           [&](auto dy, auto w, auto dx) {
             return op->BackwardData(dy, w, dx);
           },
           [&](auto x, auto dy, auto dw, auto db) {
             return op->BackwardWeights(x, dy, dw, db);
           },
           [&](const auto& x, const auto& w, const auto& b) {
             return reference::Dense(s, x, w, b);
           }},
          1e-4);
    }
  }
}

}  // namespace
}  // namespace psgd
