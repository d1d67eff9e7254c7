// Softmax cross-entropy on the GPU against the CPU backend: the loss
// (float64 on both sides: 1e-9 relative), the count of correct predictions
// (exact, ties counting as correct), and the gradient (kFloat32Tolerance),
// for batch 1, the tutorial's 10 classes at batch 128, one class, many
// classes, and all-equal logits; bad labels are refused before anything
// runs.
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

std::pair<CrossEntropyResult, std::vector<float>> Run(
    Backend* backend, const SoftmaxCrossEntropyShape& s,
    const std::vector<float>& logits, const std::vector<int32_t>& labels) {
  auto op = Unwrap(backend->CreateSoftmaxCrossEntropy(s));
  DeviceTensor tl = Upload(backend, logits, s.logits());
  DeviceTensor grad = Zeros(backend, s.logits());
  CrossEntropyResult r = Unwrap(op->Run(tl.view(), labels, grad.view()));
  return {r, Download(backend, grad.view())};
}

TEST_CASE("gpu softmax cross-entropy matches the cpu backend") {
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend("gpu:0");
  const std::vector<SoftmaxCrossEntropyShape> shapes = {
      {1, 1}, {1, 10}, {7, 10}, {128, 10}, {5, 1000}, {33, 3}, {512, 10}};
  uint64_t seed = 1;
  for (const SoftmaxCrossEntropyShape& s : shapes) {
    const int64_t n = NumElements(s.logits());
    std::vector<int32_t> labels(s.batch);
    for (int64_t i = 0; i < s.batch; ++i) {
      labels[i] = static_cast<int32_t>((i * 7 + 3) % s.classes);
    }
    const std::vector<std::pair<const char*, std::vector<float>>> inputs = {
        {"random", testing::RandomValues(n, seed++, -8, 8)},
        {"all equal", std::vector<float>(n, 1.5f)},
    };
    for (const auto& [what, logits] : inputs) {
      INFO(s.ToString() << " " << what);
      const auto want = Run(cpu.get(), s, logits, labels);
      const auto got = Run(gpu.get(), s, logits, labels);
      CHECK(got.first.loss == Approx(want.first.loss).epsilon(1e-9));
      CHECK(got.first.correct == want.first.correct);
      CHECK(RelativeError(got.second, want.second) <
            testing::kFloat32Tolerance);
    }
  }
}

TEST_CASE("gpu softmax cross-entropy refuses bad labels and views") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  const SoftmaxCrossEntropyShape s{2, 3};
  auto op = Unwrap(gpu->CreateSoftmaxCrossEntropy(s));
  DeviceTensor logits = Zeros(gpu.get(), s.logits());
  DeviceTensor grad = Upload(gpu.get(), {1, 2, 3, 4, 5, 6}, s.logits());
  absl::Status st = op->Run(logits.view(), {0, 3}, grad.view()).status();
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(st.message().find("label 3 of example 1") != absl::string_view::npos);
  CHECK(op->Run(logits.view(), {0}, grad.view()).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // Nothing was written.
  CHECK(Download(gpu.get(), grad.view()) ==
        std::vector<float>({1, 2, 3, 4, 5, 6}));
  DeviceTensor wrong = Zeros(gpu.get(), {2, 4});
  CHECK(op->Run(wrong.view(), {0, 1}, grad.view()).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
