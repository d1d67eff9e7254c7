// Why gpu_model_test compares the convolutions' gradients at batch 128 with
// kTieTolerance (model_test_inputs.h), measured on the CPU so that it runs
// everywhere: the same model on inputs that differ by a small relative noise,
// which stands for the float32 rounding differences between two backends.
//   - 1e-6 (plain float32 summation-order differences): everything within
//     kFloat32Tolerance at batch 1 and 3, and at batch 128 all but the
//     convolutions' gradients (a winner can flip even here: two runs of the
//     same CPU model differ at that level when the machine's load changes
//     the threads' summation order, and one flip moved conv1's gradient by
//     3e-3 in a loaded run), which stay within kTieTolerance;
//   - 1e-5 (cuDNN's FFT and Winograd rounding) and 1e-4 at batch 128: max
//     pooling picks other winners among near-equal values; the convolutions'
//     gradients move by up to a few 1e-2 at 1e-4 (beyond the strict
//     tolerance: the false failure this avoids), within kTieTolerance, while
//     logits (at 1e-5), loss and the gradients above the pools stay within
//     kFloat32Tolerance.
// Each comparison is printed (WARN), with the index of its largest
// difference.
#include <catch2/catch.hpp>
#include <cmath>

#include "common/model_variables.h"
#include "worker/gpu/model_test_inputs.h"
#include "worker/models/registry.h"
#include "worker/random.h"
#include "worker/testing/compare.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Compare;
using testing::Comparison;
using testing::kFloat32Tolerance;
using testing::kTieTolerance;
using testing::Unwrap;
using testing::Values;

struct Run {
  Tensor logits;
  StepResult step;
  NamedTensors grads;
};

Run Evaluate(Model* model, const NamedTensors& weights, int64_t n,
             double noise) {
  Tensor images = testing::RandomImages(n, 10 + n, 40.0);
  if (noise > 0) {
    Rng rng(99);
    for (float& v : images.span()) {
      v = static_cast<float>(v * (1.0 + rng.Uniform(-noise, noise)));
    }
  }
  const std::vector<int32_t> labels = testing::RandomLabels(n, 20 + n);
  Run r{Tensor({n, 10}), {}, {}};
  REQUIRE_OK(model->Logits(ViewsOf(weights), images.view(), r.logits.view()));
  r.step = Unwrap(
      model->ComputeGradients(ViewsOf(weights), images.view(), labels, &r.grads));
  return r;
}

// The largest relative difference among the convolutions' gradients.
double CompareRuns(const Run& a, const Run& b, double noise, int64_t n) {
  INFO("batch " << n << ", noise " << noise);
  const Comparison logits = Compare(Values(b.logits), Values(a.logits));
  WARN("batch " << n << " noise " << noise << " logits: " << logits);
  CHECK(b.step.loss == Approx(a.step.loss).epsilon(kFloat32Tolerance));
  if (noise <= 1e-5) CHECK(logits < kFloat32Tolerance);
  double worst_conv = 0;
  for (const VariableSpec& s : Cifar10TutorialVariables()) {
    const Comparison c = Compare(Values(b.grads.at(s.name)),
                                 Values(a.grads.at(s.name)), kFloat32Tolerance);
    INFO(s.name << " " << c);
    WARN("batch " << n << " noise " << noise << " " << s.name << ": " << c);
    if (n < 128 || !testing::BelowMaxPooling(s.name)) {
      CHECK(c < kFloat32Tolerance);
    } else {
      CHECK(c < kTieTolerance);
      worst_conv = std::max(worst_conv, c.relative());
    }
  }
  return worst_conv;
}

TEST_CASE("rounding-level input noise keeps the model within 1e-4") {
  auto cpu = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("cifar10_tutorial", cpu.get()));
  const NamedTensors weights = testing::TutorialWeights(7);
  for (int64_t n : {1, 3, 128}) {
    CompareRuns(Evaluate(model.get(), weights, n, 0),
                Evaluate(model.get(), weights, n, 1e-6), 1e-6, n);
  }
}

TEST_CASE("near-ties in max pooling move only the convolutions' gradients") {
  auto cpu = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("cifar10_tutorial", cpu.get()));
  const NamedTensors weights = testing::TutorialWeights(7);
  const int64_t n = 128;
  const Run exact = Evaluate(model.get(), weights, n, 0);
  CompareRuns(exact, Evaluate(model.get(), weights, n, 1e-5), 1e-5, n);
  const double worst =
      CompareRuns(exact, Evaluate(model.get(), weights, n, 1e-4), 1e-4, n);
  // The strict tolerance would fail here: flipped winners, not rounding
  // (the dense layers above the pools stayed within it).
  CHECK(worst > kFloat32Tolerance);
}

}  // namespace
}  // namespace psgd
