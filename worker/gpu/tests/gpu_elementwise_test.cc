// The GPU backend's element-wise ops against the CPU: ReLU forward and
// backward (exact, in place too), L2 weight decay (the gradient within
// 1e-6, the float64 loss within 1e-9 relative), and the Adam kernel against
// the host reference of adam.h over several steps (1e-5 relative: the same
// float operations, contracted into FMAs by nvcc).
#include <catch2/catch.hpp>
#include <cmath>

#include "worker/backend/backend.h"
#include "worker/gpu/adam.h"
#include "worker/gpu/gpu_backend.h"
#include "worker/gpu/tests/gpu_testing.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Download;
using testing::RelativeError;
using testing::Unwrap;
using testing::Upload;
using testing::Zeros;

TEST_CASE("gpu relu equals the cpu backend, in place too") {
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend("gpu:0");
  for (const Shape& shape : std::vector<Shape>{{1}, {7, 3}, {2, 64, 24, 24}}) {
    INFO(ShapeToString(shape));
    const int64_t n = NumElements(shape);
    std::vector<float> x = testing::RandomValues(n, 1, -1, 1);
    x[0] = 0.0f;
    const auto dy = testing::RandomValues(n, 2, -1, 1);
    std::vector<float> results[2][3];
    Backend* backends[2] = {cpu.get(), gpu.get()};
    for (int k = 0; k < 2; ++k) {
      Backend* b = backends[k];
      DeviceTensor tx = Upload(b, x, shape);
      DeviceTensor y = Zeros(b, shape);
      DeviceTensor tdy = Upload(b, dy, shape);
      DeviceTensor dx = Zeros(b, shape);
      REQUIRE_OK(b->ReluForward(tx.view(), y.view()));
      REQUIRE_OK(b->ReluBackward(y.view(), tdy.view(), dx.view()));
      REQUIRE_OK(b->ReluForward(tx.view(), tx.view()));
      REQUIRE_OK(b->ReluBackward(y.view(), tdy.view(), tdy.view()));
      results[k][0] = Download(b, y.view());
      results[k][1] = Download(b, dx.view());
      results[k][2] = Download(b, tdy.view());
      CHECK(Download(b, tx.view()) == results[k][0]);
    }
    CHECK(results[1][0] == results[0][0]);
    CHECK(results[1][1] == results[0][1]);
    CHECK(results[1][2] == results[0][1]);
  }
  DeviceTensor a = Zeros(gpu.get(), {2, 3});
  DeviceTensor b = Zeros(gpu.get(), {3, 2});
  CHECK(gpu->ReluForward(a.view(), b.view()).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("gpu l2 weight decay matches the cpu backend") {
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend("gpu:0");
  for (const Shape& shape :
       std::vector<Shape>{{1}, {5, 3}, {2304, 384}, {384, 192}}) {
    INFO(ShapeToString(shape));
    const int64_t n = NumElements(shape);
    const auto w = testing::RandomValues(n, 3, -0.1f, 0.1f);
    const auto g = testing::RandomValues(n, 4, -1, 1);
    DeviceTensor cw = Upload(cpu.get(), w, shape);
    DeviceTensor cg = Upload(cpu.get(), g, shape);
    DeviceTensor gw = Upload(gpu.get(), w, shape);
    DeviceTensor gg = Upload(gpu.get(), g, shape);
    const double want =
        Unwrap(cpu->L2WeightDecay(cw.view(), 0.004f, cg.view()));
    const double got = Unwrap(gpu->L2WeightDecay(gw.view(), 0.004f, gg.view()));
    CHECK(got == Approx(want).epsilon(1e-9));
    CHECK(RelativeError(Download(gpu.get(), gg.view()),
                        Download(cpu.get(), cg.view())) < 1e-6);
  }
}

TEST_CASE("the gpu adam kernel follows the host reference") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  const int64_t n = 100003;  // not a multiple of a block
  std::vector<float> w = testing::RandomValues(n, 5, -1, 1);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  DeviceTensor tw = Upload(gpu.get(), w, {n});
  DeviceTensor tm = Zeros(gpu.get(), {n});
  DeviceTensor tv = Zeros(gpu.get(), {n});
  gpu::AdamParams params;
  params.learning_rate = 0.01f;
  for (int64_t step = 1; step <= 5; ++step) {
    const auto g = testing::RandomValues(n, 10 + step, -1, 1);
    DeviceTensor tg = Upload(gpu.get(), g, {n});
    REQUIRE_OK(GpuAdamUpdate(gpu.get(), params, step, tw.view(), tg.view(),
                             tm.view(), tv.view()));
    gpu::AdamUpdateReference(params, step, absl::MakeSpan(w), g,
                             absl::MakeSpan(m), absl::MakeSpan(v));
  }
  CHECK(RelativeError(Download(gpu.get(), tw.view()), w) < 1e-5);
  CHECK(RelativeError(Download(gpu.get(), tm.view()), m) < 1e-5);
  CHECK(RelativeError(Download(gpu.get(), tv.view()), v) < 1e-5);
  CHECK(GpuAdamUpdate(gpu.get(), params, 0, tw.view(), tw.view(), tm.view(),
                      tv.view())
            .code() == absl::StatusCode::kInvalidArgument);
  auto cpu = testing::MakeBackend("cpu");
  CHECK(GpuAdamUpdate(cpu.get(), params, 1, tw.view(), tw.view(), tm.view(),
                      tv.view())
            .code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
