// LRN on the GPU (cuDNN where its limits allow, and the kernel) against the
// CPU backend: forward and backward on random inputs for the tutorial's
// constants and shapes, batch 1, a window wider than the channels, one
// channel, and parameters beyond cuDNN's limits (radius 9, beta 0), under
// every GPU option set. Tolerance kFloat32Tolerance (1e-4 of the largest
// value): float32 on both sides, cuDNN's order of operations differs.
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

std::pair<std::vector<float>, std::vector<float>> Run(
    Backend* backend, const LrnShape& s, const std::vector<float>& x,
    const std::vector<float>& dy) {
  auto op = Unwrap(backend->CreateLrn(s));
  DeviceTensor tx = Upload(backend, x, s.input());
  DeviceTensor tdy = Upload(backend, dy, s.input());
  DeviceTensor y = Zeros(backend, s.input());
  DeviceTensor dx = Zeros(backend, s.input());
  REQUIRE_OK(op->Forward(tx.view(), y.view()));
  REQUIRE_OK(op->Backward(tx.view(), y.view(), tdy.view(), dx.view()));
  return {Download(backend, y.view()), Download(backend, dx.view())};
}

TEST_CASE("gpu lrn matches the cpu backend") {
  const LrnParams tutorial;
  const LrnParams tutorial_scaled{4, 1.0f, 0.05f, 0.75f};
  const LrnParams strong{2, 2.0f, 0.5f, 0.6f};
  const LrnParams wide{9, 1.5f, 0.01f, 0.75f};  // window 19 > cuDNN's 16
  const LrnParams flat{1, 1.0f, 0.3f, 0.0f};    // beta 0 < cuDNN's 0.01
  const std::vector<LrnShape> shapes = {
      {1, 1, 1, 1, tutorial},
      {2, 64, 12, 12, tutorial},
      {1, 64, 12, 12, tutorial},
      {1, 3, 5, 7, tutorial_scaled},
      {2, 16, 4, 3, tutorial_scaled},
      {3, 5, 2, 2, strong},
      {1, 1, 3, 3, strong},
      {2, 24, 3, 3, wide},
      {2, 4, 3, 5, flat},
      {32, 64, 12, 12, tutorial},
  };
  auto cpu = testing::MakeBackend("cpu");
  for (const std::string& name : testing::GpuBackendNames()) {
    auto gpu = testing::MakeGpuBackend(name);
    uint64_t seed = 1;
    for (const LrnShape& s : shapes) {
      INFO(name << " " << s.ToString());
      // The tutorial's LRN sees activations of tens; its alpha is tiny.
      const float scale = s.params.alpha < 0.01f ? 30.0f : 2.0f;
      const int64_t n = NumElements(s.input());
      const auto x = testing::RandomValues(n, seed++, -scale, scale);
      const auto dy = testing::RandomValues(n, seed++, -1, 1);
      const auto want = Run(cpu.get(), s, x, dy);
      const auto got = Run(gpu.get(), s, x, dy);
      INFO("plans:\n" << testing::PlanNotes(*gpu));
      CHECK(RelativeError(got.first, want.first) < testing::kFloat32Tolerance);
      CHECK(RelativeError(got.second, want.second) <
            testing::kFloat32Tolerance);
    }
  }
}

TEST_CASE("gpu lrn refuses invalid parameters and views") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  LrnParams bad;
  bad.bias = 0.0f;
  CHECK(gpu->CreateLrn({1, 2, 2, 2, bad}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto op = Unwrap(gpu->CreateLrn({1, 2, 2, 2, LrnParams()}));
  DeviceTensor x = Zeros(gpu.get(), {1, 2, 2, 2});
  DeviceTensor y = Zeros(gpu.get(), {1, 2, 2, 3});
  CHECK(op->Forward(x.view(), y.view()).code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
