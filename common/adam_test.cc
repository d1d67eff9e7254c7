#include "common/adam.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

namespace psgd {
namespace {

TEST_CASE("TensorFlow's form: the constants of step t") {
  AdamHyper h;
  h.learning_rate = 0.01;
  const AdamStep c = TensorFlowAdamStep(h, 3, 0.5);
  CHECK(c.step_size ==
        static_cast<float>(0.01 * 0.5 * std::sqrt(1 - std::pow(0.999, 3)) /
                           (1 - std::pow(0.9, 3))));
  CHECK(c.sqrt_v_scale == 1.0f);
  CHECK(c.one_minus_beta1 == static_cast<float>(1.0 - 0.9));
  CHECK(c.one_minus_beta2 == static_cast<float>(1.0 - 0.999));
  CHECK(c.epsilon == 1e-8f);
}

TEST_CASE("PyTorch's form: the constants of step t") {
  AdamHyper h;
  const AdamStep c = PyTorchAdamStep(h, 2);
  CHECK(c.step_size == static_cast<float>(0.001 / (1 - 0.9 * 0.9)));
  CHECK(c.sqrt_v_scale ==
        static_cast<float>(1 / std::sqrt(1 - std::pow(0.999, 2))));
}

TEST_CASE("one element, by hand") {
  AdamStep c;
  c.beta1 = 0.5f;
  c.one_minus_beta1 = 0.5f;
  c.beta2 = 0.75f;
  c.one_minus_beta2 = 0.25f;
  c.step_size = 0.125f;
  c.sqrt_v_scale = 2.0f;
  c.epsilon = 1.0f;
  float m = 2.0f, v = 4.0f;
  // m = 0.5*2 + 0.5*4 = 3; v = 0.75*4 + 0.25*16 = 7;
  // w = 1 - 0.125*3 / (sqrt(7)*2 + 1)
  const float w = AdamElement(c, 1.0f, 4.0f, &m, &v);
  CHECK(m == 3.0f);
  CHECK(v == 7.0f);
  CHECK(w == 1.0f - 0.125f * 3.0f / (std::sqrt(7.0f) * 2.0f + 1.0f));
}

TEST_CASE("the options' rules name the first bad option") {
  AdamHyper h;
  CHECK_FALSE(FindOptimizerOptionProblem(h, true).has_value());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double lr : {0.0, -1.0, nan, inf}) {
    AdamHyper b = h;
    b.learning_rate = lr;
    auto p = FindOptimizerOptionProblem(b, false);
    REQUIRE(p.has_value());
    CHECK(p->field == "learning_rate");
  }
  for (double beta : {-0.1, 1.0, nan}) {
    AdamHyper b = h;
    b.beta1 = beta;
    CHECK(FindOptimizerOptionProblem(b, true)->field == "beta1");
    CHECK_FALSE(FindOptimizerOptionProblem(b, false).has_value());  // sgd
    b = h;
    b.beta2 = beta;
    CHECK(FindOptimizerOptionProblem(b, true)->field == "beta2");
  }
  for (double eps : {0.0, -1e-8, nan, inf}) {
    AdamHyper b = h;
    b.epsilon = eps;
    CHECK(FindOptimizerOptionProblem(b, true)->field == "epsilon");
  }
}

}  // namespace
}  // namespace psgd
