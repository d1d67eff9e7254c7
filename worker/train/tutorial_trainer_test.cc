// The device-resident trainer against the Model API on the CPU backend:
// same loss, same gradients (the same ops in the same order, so equal up to
// summation order inside the libraries), weights round-trip through the
// flat buffer, and bad inputs are refused. Runs everywhere.
#include "worker/train/tutorial_trainer.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "common/model_variables.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"
#include "worker/random.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/model_test_inputs.h"

namespace psgd {
namespace {

using testing::Unwrap;

double MaxAbs(const Tensor& t) {
  double m = 0;
  for (float v : t.span()) m = std::max(m, double{std::abs(v)});
  return m;
}

TEST_CASE("trainer gradients equal the model's on the cpu backend") {
  auto backend = testing::MakeBackend("cpu");
  const int64_t n = 3;
  auto model = Unwrap(CreateModel("cifar10_tutorial", backend.get()));
  auto trainer = Unwrap(TutorialTrainer::Create(backend.get(), n));
  CHECK(trainer->batch() == n);
  CHECK(trainer->flat_size() >= TotalParameters(Cifar10TutorialVariables()));
  CHECK(trainer->flat_size() % 64 == 0);

  const NamedTensors weights = testing::TutorialWeights(5);
  REQUIRE_OK(trainer->SetWeights(ViewsOf(weights)));
  NamedTensors back;
  REQUIRE_OK(trainer->GetWeights(&back));
  for (const auto& [name, t] : weights) {
    INFO(name);
    REQUIRE(back.at(name).shape() == t.shape());
    CHECK(std::equal(t.span().begin(), t.span().end(),
                     back.at(name).span().begin()));
  }

  const Tensor images = testing::RandomImages(n, 9, 40.0);
  const std::vector<int32_t> labels = {4, 0, 9};
  NamedTensors model_grads, trainer_grads;
  const StepResult a = Unwrap(model->ComputeGradients(
      ViewsOf(weights), images.view(), labels, &model_grads));
  const StepResult b = Unwrap(trainer->ComputeGradients(images.view(), labels));
  REQUIRE_OK(trainer->GetGradients(&trainer_grads));
  CHECK(b.loss == Approx(a.loss).epsilon(1e-6));
  CHECK(b.cross_entropy == Approx(a.cross_entropy).epsilon(1e-6));
  CHECK(b.weight_decay == Approx(a.weight_decay).epsilon(1e-6));
  CHECK(b.correct == a.correct);
  CHECK(b.examples == n);
  for (const VariableSpec& s : Cifar10TutorialVariables()) {
    const Tensor& ga = model_grads.at(s.name);
    const Tensor& gb = trainer_grads.at(s.name);
    REQUIRE(gb.shape() == s.shape);
    double diff = 0;
    for (int64_t i = 0; i < ga.size(); ++i) {
      diff = std::max(diff, double{std::abs(ga.data()[i] - gb.data()[i])});
    }
    INFO(s.name << ": max |difference| " << diff << ", max |gradient| "
                << MaxAbs(ga));
    CHECK(MaxAbs(ga) > 0);
    CHECK(diff <= 1e-6 * MaxAbs(ga));
  }
}

TEST_CASE("trainer refuses bad weights, images and labels") {
  auto backend = testing::MakeBackend("cpu");
  auto trainer = Unwrap(TutorialTrainer::Create(backend.get(), 2));
  NamedTensors weights = testing::TutorialWeights(1);
  NamedConstViews views = ViewsOf(weights);
  views.erase("local4/biases");
  CHECK(trainer->SetWeights(views).code() ==
        absl::StatusCode::kInvalidArgument);
  views = ViewsOf(weights);
  views["extra"] = views["local4/biases"];
  CHECK(trainer->SetWeights(views).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE_OK(trainer->SetWeights(ViewsOf(weights)));
  const Tensor three = testing::RandomImages(3, 2, 40.0);
  CHECK(trainer->ComputeGradients(three.view(), {0, 1, 2}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  const Tensor two = testing::RandomImages(2, 2, 40.0);
  CHECK(trainer->ComputeGradients(two.view(), {0, 10}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(TutorialTrainer::Create(backend.get(), 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
