// The linear model against the float64 reference ops: logits, the loss, and
// the gradients of both variables against central finite differences of the
// reference loss. Also the registry and the refusal of bad inputs.
#include "worker/models/cifar10_linear.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "common/model_variables.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"
#include "worker/random.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using reference::Vec;
using testing::Unwrap;

double RefLoss(int64_t n, const Vec& x, const std::vector<int32_t>& labels,
               const Vec& w, const Vec& b) {
  return reference::SoftmaxCrossEntropy(
      n, 10, reference::Dense({n, 1728, 10}, x, w, b), labels);
}

Tensor Images(int64_t n, uint64_t seed) {
  Tensor t({n, 3, 24, 24});
  Rng rng(seed);
  for (float& v : t.span()) v = static_cast<float>(rng.Uniform(-1, 1));
  return t;
}

TEST_CASE("the linear model is found by name with its variables") {
  std::unique_ptr<Backend> backend = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("cifar10_linear", backend.get()));
  CHECK(model->name() == "cifar10_linear");
  CHECK(TotalParameters(model->variables()) == 17290);
  CHECK(Unwrap(ModelVariables("cifar10_linear")).size() == 2);
  CHECK(model->image_shape() == Shape{3, 24, 24});
}

TEST_CASE("linear: loss and gradients match finite differences") {
  std::unique_ptr<Backend> backend = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("cifar10_linear", backend.get()));
  NamedTensors weights = InitialValues(Cifar10LinearVariables(), 5);
  Rng rng(9);
  for (float& v : weights.at("linear/biases").span()) {
    v = static_cast<float>(rng.Uniform(-0.2, 0.2));
  }
  const int64_t n = 3;
  Tensor images = Images(n, 4);
  const std::vector<int32_t> labels = {1, 7, 7};
  NamedTensors grads;
  StepResult r = Unwrap(
      model->ComputeGradients(ViewsOf(weights), images.view(), labels, &grads));
  const Vec x(images.data(), images.data() + images.size());
  const Tensor& wt = weights.at("linear/weights");
  const Tensor& bt = weights.at("linear/biases");
  Vec w(wt.data(), wt.data() + wt.size()), b(bt.data(), bt.data() + bt.size());
  CHECK(r.loss == Approx(RefLoss(n, x, labels, w, b)).epsilon(1e-5));
  CHECK(r.loss == r.cross_entropy);
  CHECK(r.examples == 3);

  for (const char* name : {"linear/weights", "linear/biases"}) {
    Vec& v = std::string(name) == "linear/weights" ? w : b;
    const Tensor& g = grads.at(name);
    double max_grad = 0, max_err = 0;
    for (float e : g.span()) max_grad = std::max(max_grad, double{std::abs(e)});
    Rng pick(17);
    for (int k = 0; k < 10; ++k) {
      const int64_t i = static_cast<int64_t>(pick.UniformInt(g.size()));
      const double h = 1e-5, saved = v[i];
      v[i] = saved + h;
      const double up = RefLoss(n, x, labels, w, b);
      v[i] = saved - h;
      const double down = RefLoss(n, x, labels, w, b);
      v[i] = saved;
      max_err =
          std::max(max_err, std::abs((up - down) / (2 * h) - g.data()[i]));
    }
    INFO(name << ": max |error| " << max_err << ", max |gradient| "
              << max_grad);
    CHECK(max_grad > 0);
    CHECK(max_err / max_grad < 1e-3);
  }

  Tensor logits({n, 10});
  REQUIRE_OK(model->Logits(ViewsOf(weights), images.view(), logits.view()));
  const Vec ref = reference::Dense({n, 1728, 10}, x, w, b);
  for (int64_t i = 0; i < n * 10; ++i) {
    CHECK(std::abs(logits.data()[i] - ref[i]) < 1e-4);
  }
}

TEST_CASE("linear: bad images and labels are refused with the reason") {
  std::unique_ptr<Backend> backend = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("cifar10_linear", backend.get()));
  NamedTensors weights = InitialValues(Cifar10LinearVariables(), 5);
  NamedTensors grads;
  Tensor images = Images(2, 1);
  absl::Status s =
      model->ComputeGradients(ViewsOf(weights), images.view(), {0, 10}, &grads)
          .status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("label 10"));
  Tensor wrong({2, 3, 32, 32});
  s = model->ComputeGradients(ViewsOf(weights), wrong.view(), {0, 1}, &grads)
          .status();
  CHECK_THAT(std::string(s.message()), Catch::Contains("[2, 3, 32, 32]"));
}

}  // namespace
}  // namespace psgd
