#include "worker/train/adam.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace psgd {
namespace {

// TensorFlow's formula in double, step by step.
struct RefAdam {
  double m = 0, v = 0, w;
  void Step(double g, int t, double lr = 0.001, double b1 = 0.9,
            double b2 = 0.999, double eps = 1e-8) {
    const double lr_t =
        lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    w -= lr_t * m / (std::sqrt(v) + eps);
  }
};

TEST_CASE("AdamUpdate follows TensorFlow's AdamOptimizer") {
  const std::vector<float> start = {0.5f, -1.0f, 0.0f, 2.0f};
  std::vector<float> w = start, m(4), v(4);
  std::vector<RefAdam> ref;
  for (float x : start) ref.push_back(RefAdam{0, 0, x});
  for (int t = 1; t <= 50; ++t) {
    std::vector<float> g(4);
    for (int i = 0; i < 4; ++i) {
      g[i] = std::sin(0.3 * t + i) * (i + 1) * 0.1f;  // varying gradients
      ref[i].Step(g[i], t);
    }
    AdamUpdate(AdamOptions(), t, absl::MakeSpan(w), absl::MakeSpan(m),
               absl::MakeSpan(v), g);
  }
  for (int i = 0; i < 4; ++i) {
    CHECK(w[i] == Approx(ref[i].w).margin(1e-6));
    CHECK(m[i] == Approx(ref[i].m).margin(1e-6));
  }
  // The first step moves every weight by about lr against its gradient.
  std::vector<float> w1 = {1.0f}, m1(1), v1(1);
  const std::vector<float> g1 = {123.0f};
  AdamUpdate(AdamOptions(), 1, absl::MakeSpan(w1), absl::MakeSpan(m1),
             absl::MakeSpan(v1), g1);
  CHECK(w1[0] == Approx(1.0 - 0.001).margin(1e-7));
}

TEST_CASE("LocalAdam applies by name and refuses mismatches") {
  NamedTensors weights, grads;
  weights.emplace("a", Tensor::FromVector({2}, {1, 2}).value());
  grads.emplace("a", Tensor::FromVector({2}, {1, -1}).value());
  LocalAdam adam(AdamOptions{0.1f, 0.9f, 0.999f, 1e-8f});
  REQUIRE(adam.Apply(grads, &weights).ok());
  CHECK(adam.steps() == 1);
  CHECK(weights.at("a").data()[0] == Approx(0.9));
  CHECK(weights.at("a").data()[1] == Approx(2.1));

  NamedTensors wrong;
  wrong.emplace("a", Tensor({3}));
  CHECK(adam.Apply(wrong, &weights).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(adam.Apply(NamedTensors(), &weights).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(adam.steps() == 1);  // nothing applied
}

TEST_CASE("Adam options are validated") {
  CHECK(ValidateAdamOptions(AdamOptions()).ok());
  AdamOptions o;
  o.learning_rate = 0;
  CHECK(ValidateAdamOptions(o).code() == absl::StatusCode::kInvalidArgument);
  o = AdamOptions();
  o.beta1 = 1.0f;
  CHECK(ValidateAdamOptions(o).code() == absl::StatusCode::kInvalidArgument);
  o = AdamOptions();
  o.beta2 = -0.1f;
  CHECK(ValidateAdamOptions(o).code() == absl::StatusCode::kInvalidArgument);
  o = AdamOptions();
  o.epsilon = std::nanf("");
  CHECK(ValidateAdamOptions(o).code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
