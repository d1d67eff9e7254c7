// The max-pooling kernels against the CPU backend: forward and backward on
// distinct random values (no near-ties), on all-equal inputs (the first
// maximum of each window wins on both), and after a ReLU (ties at zero), for
// the tutorial's shapes, batch 1, odd sizes and windows larger than the
// image. Pooling moves values without arithmetic except the sum of
// overlapping windows' gradients, which both backends add in the same
// order: the results must be equal.
#include <catch2/catch.hpp>

#include "worker/backend/backend.h"
#include "worker/gpu/tests/gpu_testing.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Download;
using testing::Unwrap;
using testing::Upload;
using testing::Zeros;

std::pair<std::vector<float>, std::vector<float>> Run(
    Backend* backend, const PoolShape& s, const std::vector<float>& x,
    const std::vector<float>& dy) {
  auto op = Unwrap(backend->CreateMaxPool(s));
  DeviceTensor tx = Upload(backend, x, s.input());
  DeviceTensor tdy = Upload(backend, dy, s.output());
  DeviceTensor y = Zeros(backend, s.output());
  DeviceTensor dx = Zeros(backend, s.input());
  REQUIRE_OK(op->Forward(tx.view(), y.view()));
  REQUIRE_OK(op->Backward(tx.view(), y.view(), tdy.view(), dx.view()));
  return {Download(backend, y.view()), Download(backend, dx.view())};
}

TEST_CASE("gpu max pooling equals the cpu backend") {
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend("gpu:0");
  const std::vector<PoolShape> shapes = {
      {1, 1, 1, 1, 3, 2}, {2, 64, 24, 24, 3, 2}, {3, 64, 12, 12, 3, 2},
      {3, 5, 7, 9, 3, 2}, {1, 2, 5, 5, 2, 2},    {2, 3, 6, 6, 3, 1},
      {1, 1, 4, 4, 5, 3}, {2, 2, 8, 3, 4, 3},
  };
  uint64_t seed = 1;
  for (const PoolShape& s : shapes) {
    const int64_t n = NumElements(s.input());
    const auto dy =
        testing::RandomValues(NumElements(s.output()), seed++, -1, 1);
    std::vector<float> relu = testing::RandomValues(n, seed++, -1, 1);
    for (float& v : relu) v = std::max(v, 0.0f);
    const std::vector<std::pair<const char*, std::vector<float>>> inputs = {
        {"distinct", testing::DistinctValues(n, seed++, -1, 1)},
        {"all equal", std::vector<float>(n, 0.5f)},
        {"after relu", relu},
    };
    for (const auto& [what, x] : inputs) {
      INFO(s.ToString() << " " << what);
      const auto want = Run(cpu.get(), s, x, dy);
      const auto got = Run(gpu.get(), s, x, dy);
      CHECK(got.first == want.first);
      CHECK(got.second == want.second);
    }
  }
}

TEST_CASE("gpu max pooling refuses views of another shape") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  const PoolShape s{1, 2, 6, 6, 3, 2};
  auto op = Unwrap(gpu->CreateMaxPool(s));
  DeviceTensor x = Zeros(gpu.get(), s.input());
  DeviceTensor y = Zeros(gpu.get(), {1, 2, 4, 4});
  CHECK(op->Forward(x.view(), y.view()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(gpu->CreateMaxPool({1, 2, 6, 6, 0, 2}).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
