// Why gpu_model_test compares the gradients at batch 128 with
// kTieTolerance (model_test_inputs.h), measured on the CPU so that it runs
// everywhere: the same model on inputs that differ by a small relative noise,
// which stands for the float32 rounding differences between two backends.
// At batch 1 and 3 everything stays within kFloat32Tolerance at noise 1e-6.
// At batch 128 there are ties: max pooling picks another winner among
// near-equal values, and a ReLU whose input is within rounding of zero opens
// or closes; either moves a whole channel's or unit's weight gradient.
// Measured on this machine (noise 1e-5 is the size of cuDNN's FFT and
// Winograd rounding): conv gradients up to 4.5e-3, and in one fresh-clone
// run local3's up to 2.4e-2 at 1e-5 and 4.4e-2 at 1e-4 (a ReLU gate), even
// conv1's 3.2e-3 at 1e-6 in a loaded run. So at batch 128 every gradient is
// held to kTieTolerance at noise <= 1e-5, while logits and loss stay within
// kFloat32Tolerance; at 1e-4 the strict tolerance must fail somewhere (the
// false failure this avoids). Each comparison is printed (WARN), with the
// index of its largest difference.
#include <catch2/catch.hpp>
#include <cmath>

#include "common/model_variables.h"
#include "worker/models/registry.h"
#include "worker/random.h"
#include "worker/testing/compare.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/model_test_inputs.h"

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
  r.step = Unwrap(model->ComputeGradients(ViewsOf(weights), images.view(),
                                          labels, &r.grads));
  return r;
}

// The largest relative difference among the gradients.
double CompareRuns(const Run& a, const Run& b, double noise, int64_t n) {
  INFO("batch " << n << ", noise " << noise);
  const Comparison logits = Compare(Values(b.logits), Values(a.logits));
  WARN("batch " << n << " noise " << noise << " logits: " << logits);
  CHECK(b.step.loss == Approx(a.step.loss).epsilon(kFloat32Tolerance));
  if (noise <= 1e-5) CHECK(logits < kFloat32Tolerance);
  double worst = 0;
  for (const VariableSpec& s : Cifar10TutorialVariables()) {
    const Comparison c = Compare(Values(b.grads.at(s.name)),
                                 Values(a.grads.at(s.name)), kFloat32Tolerance);
    INFO(s.name << " " << c);
    WARN("batch " << n << " noise " << noise << " " << s.name << ": " << c);
    if (n < 128) {
      CHECK(c < kFloat32Tolerance);
    } else if (noise <= 1e-5) {
      CHECK(c < kTieTolerance);
    }
    worst = std::max(worst, c.relative());
  }
  return worst;
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

TEST_CASE("near-ties at batch 128 move gradients beyond the strict tolerance") {
  auto cpu = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("cifar10_tutorial", cpu.get()));
  const NamedTensors weights = testing::TutorialWeights(7);
  const int64_t n = 128;
  const Run exact = Evaluate(model.get(), weights, n, 0);
  CompareRuns(exact, Evaluate(model.get(), weights, n, 1e-5), 1e-5, n);
  const double worst =
      CompareRuns(exact, Evaluate(model.get(), weights, n, 1e-4), 1e-4, n);
  // The strict tolerance would fail here: flipped winners and gates, not
  // rounding.
  CHECK(worst > kFloat32Tolerance);
}

}  // namespace
}  // namespace psgd
