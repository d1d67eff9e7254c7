// The cuBLAS dense layer against the CPU backend: forward, backward data and
// backward weights (with the bias gradient) on random inputs for the
// tutorial's layers at batch 1 and 128, and odd sizes. Tolerance
// kFloat32Tolerance (1e-4 of the largest value) with float32 math, and
// kTf32Tolerance with tf32=on.
#include <catch2/catch.hpp>

#include "worker/backend/backend.h"
#include "worker/gpu/tests/gpu_testing.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Download;
using testing::RelativeError;
using testing::Unwrap;
using testing::Upload;
using testing::Zeros;

struct Results {
  std::vector<float> y, dx, dw, db;
};

Results Run(Backend* backend, const DenseShape& s, const std::vector<float>& x,
            const std::vector<float>& w, const std::vector<float>& b,
            const std::vector<float>& dy) {
  auto op = Unwrap(backend->CreateDense(s));
  DeviceTensor tx = Upload(backend, x, s.input());
  DeviceTensor tw = Upload(backend, w, s.weights());
  DeviceTensor tb = Upload(backend, b, s.bias());
  DeviceTensor tdy = Upload(backend, dy, s.output());
  DeviceTensor y = Zeros(backend, s.output());
  DeviceTensor dx = Zeros(backend, s.input());
  DeviceTensor dw = Zeros(backend, s.weights());
  DeviceTensor db = Zeros(backend, s.bias());
  REQUIRE_OK(op->Forward(tx.view(), tw.view(), tb.view(), y.view()));
  REQUIRE_OK(op->BackwardData(tdy.view(), tw.view(), dx.view()));
  REQUIRE_OK(op->BackwardWeights(tx.view(), tdy.view(), dw.view(), db.view()));
  return {Download(backend, y.view()), Download(backend, dx.view()),
          Download(backend, dw.view()), Download(backend, db.view())};
}

void Compare(const std::string& gpu_name, double tolerance) {
  const std::vector<DenseShape> shapes = {
      {1, 1, 1},       {1, 2304, 384}, {5, 7, 3},      {128, 2304, 384},
      {128, 384, 192}, {3, 192, 10},   {512, 192, 10}, {17, 33, 65},
  };
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend(gpu_name);
  uint64_t seed = 1;
  for (const DenseShape& s : shapes) {
    INFO(gpu_name << " " << s.ToString());
    const auto x = testing::RandomValues(NumElements(s.input()), seed++, -1, 1);
    const auto w =
        testing::RandomValues(NumElements(s.weights()), seed++, -1, 1);
    const auto b = testing::RandomValues(s.outputs, seed++, -1, 1);
    const auto dy =
        testing::RandomValues(NumElements(s.output()), seed++, -1, 1);
    const Results want = Run(cpu.get(), s, x, w, b, dy);
    const Results got = Run(gpu.get(), s, x, w, b, dy);
    CHECK(RelativeError(got.y, want.y) < tolerance);
    CHECK(RelativeError(got.dx, want.dx) < tolerance);
    CHECK(RelativeError(got.dw, want.dw) < tolerance);
    CHECK(RelativeError(got.db, want.db) < tolerance);
  }
}

TEST_CASE("gpu dense matches the cpu backend in float32") {
  Compare("gpu:0", testing::kFloat32Tolerance);
}

TEST_CASE("gpu dense with tf32 matches within the tf32 tolerance") {
  Compare("gpu:0:tf32=on", testing::kTf32Tolerance);
}

TEST_CASE("gpu dense refuses views of another shape") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  const DenseShape s{2, 3, 4};
  auto op = Unwrap(gpu->CreateDense(s));
  DeviceTensor x = Zeros(gpu.get(), s.input());
  DeviceTensor w = Zeros(gpu.get(), {4, 3});
  DeviceTensor b = Zeros(gpu.get(), s.bias());
  DeviceTensor y = Zeros(gpu.get(), s.output());
  CHECK(op->Forward(x.view(), w.view(), b.view(), y.view()).code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
