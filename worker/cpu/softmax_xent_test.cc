// Softmax cross-entropy: the loss against a float64 reference, dlogits
// against its finite differences, accuracy counting, label validation.
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

TEST_CASE("softmax cross-entropy loss and gradient match the reference") {
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (auto [n, k] :
         {std::pair<int64_t, int64_t>{1, 1}, {1, 10}, {7, 3}, {128, 10}}) {
      INFO(name << " " << n << "x" << k);
      const SoftmaxCrossEntropyShape s{n, k};
      auto op = Unwrap(backend->CreateSoftmaxCrossEntropy(s));
      // Large logits check the max-subtraction.
      const auto logits = testing::RandomValues(n * k, 31, -40, 40);
      std::vector<int32_t> labels(n);
      for (int64_t i = 0; i < n; ++i)
        labels[i] = static_cast<int32_t>((i * 7) % k);
      DeviceTensor dl = Upload(backend.get(), logits, s.logits());
      DeviceTensor grad = Zeros(backend.get(), s.logits());
      CrossEntropyResult result =
          Unwrap(op->Run(dl.view(), labels, grad.view()));
      const auto ld = testing::ToDouble(logits);
      CHECK(result.loss ==
            Approx(reference::SoftmaxCrossEntropy(n, k, ld, labels))
                .epsilon(1e-6));
      auto e = testing::CompareGradient(
          [&, n = n, k = k](const auto& v) {
            return reference::SoftmaxCrossEntropy(n, k, v, labels);
          },
          ld, Download(backend.get(), grad.view()), 1e-4);
      INFO(e.ToString());
      CHECK(e.relative() < 1e-4);
      int64_t correct = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float* row = logits.data() + i * k;
        correct += std::max_element(row, row + k) - row == labels[i];
      }
      CHECK(result.correct == correct);
    }
  }
}

TEST_CASE("ties count as correct; labels outside the classes are refused") {
  auto backend = testing::MakeBackend("cpu");
  const SoftmaxCrossEntropyShape s{2, 3};
  auto op = Unwrap(backend->CreateSoftmaxCrossEntropy(s));
  DeviceTensor logits = Upload(backend.get(), {1, 1, 0, 0, 2, 1}, s.logits());
  DeviceTensor grad = Zeros(backend.get(), s.logits());
  std::vector<int32_t> labels = {1, 0};
  CrossEntropyResult r = Unwrap(op->Run(logits.view(), labels, grad.view()));
  CHECK(r.correct == 1);

  grad = Upload(backend.get(), {9, 9, 9, 9, 9, 9}, s.logits());
  labels = {0, 3};
  absl::StatusOr<CrossEntropyResult> bad =
      op->Run(logits.view(), labels, grad.view());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("label 3 of example 1") !=
        absl::string_view::npos);
  // Nothing was written.
  CHECK(Download(backend.get(), grad.view()) == std::vector<float>(6, 9.0f));
  labels = {0};
  CHECK(op->Run(logits.view(), labels, grad.view()).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
