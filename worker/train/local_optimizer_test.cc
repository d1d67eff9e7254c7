#include "worker/train/local_optimizer.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "common/lr_schedule.h"

namespace psgd {
namespace {

// TensorFlow's Adam in double, step by step.
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

// PyTorch's SGD (dampening 0) in double.
struct RefSgd {
  double buf = 0, w;
  void Step(double g, double lr, double momentum, bool nesterov, double wd) {
    double d = g + wd * w;
    buf = momentum * buf + d;
    d = nesterov ? d + momentum * buf : buf;
    w -= lr * d;
  }
};

std::vector<VariableSpec> Specs() {
  return {{"a", {4}, Initializer::Constant(0)},
          {"b", {2}, Initializer::Constant(0)}};
}

NamedTensors Tensors(std::vector<float> a, std::vector<float> b) {
  NamedTensors t;
  t.emplace("a", Tensor::FromVector({4}, std::move(a)).value());
  t.emplace("b", Tensor::FromVector({2}, std::move(b)).value());
  return t;
}

TEST_CASE("Adam follows TensorFlow's AdamOptimizer") {
  ps::OptimizerOptions o;  // Adam, TensorFlow's defaults
  auto opt = LocalOptimizer::Create(o, Specs());
  REQUIRE(opt.ok());
  NamedTensors w = Tensors({0.5f, -1.0f, 0.0f, 2.0f}, {1.0f, 0.25f});
  std::vector<RefAdam> ref;
  for (float x : {0.5f, -1.0f, 0.0f, 2.0f, 1.0f, 0.25f})
    ref.push_back({0, 0, x});
  for (int t = 1; t <= 50; ++t) {
    std::vector<float> g(6);
    for (int i = 0; i < 6; ++i) {
      g[i] = std::sin(0.3 * t + i) * (i + 1) * 0.1f;  // varying gradients
      ref[i].Step(g[i], t);
    }
    REQUIRE((*opt)
                ->Apply(Tensors({g[0], g[1], g[2], g[3]}, {g[4], g[5]}), &w)
                .ok());
  }
  CHECK((*opt)->steps() == 50);
  for (int i = 0; i < 6; ++i) {
    const float got = i < 4 ? w.at("a").data()[i] : w.at("b").data()[i - 4];
    CHECK(got == Approx(ref[i].w).margin(1e-6));
  }
}

TEST_CASE(
    "momentum SGD with Nesterov, weight decay and a schedule follows "
    "PyTorch's SGD") {
  ps::OptimizerOptions o;
  o.kind = ps::OptimizerOptions::Kind::kMomentum;
  o.learning_rate = 0.1;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 5e-4;
  o.no_weight_decay = {"b"};
  o.schedule.warmup_steps = 3;
  o.schedule.warmup_from = 0.1;
  o.schedule.decay = LrSchedule::Decay::kCosine;
  o.schedule.decay_steps = 7;
  auto opt = LocalOptimizer::Create(o, Specs());
  REQUIRE(opt.ok());
  NamedTensors w = Tensors({0.5f, -1.0f, 0.0f, 2.0f}, {1.0f, 0.25f});
  std::vector<RefSgd> ref;
  for (float x : {0.5f, -1.0f, 0.0f, 2.0f, 1.0f, 0.25f}) ref.push_back({0, x});
  for (int t = 1; t <= 10; ++t) {
    const double lr = 0.1 * LrFactor(o.schedule, t);
    CHECK((*opt)->next_learning_rate() == Approx(lr));
    std::vector<float> g(6);
    for (int i = 0; i < 6; ++i) {
      g[i] = std::cos(0.7 * t + i) * 0.5f;
      ref[i].Step(g[i], lr, 0.9, true, i < 4 ? 5e-4 : 0.0);
    }
    REQUIRE((*opt)
                ->Apply(Tensors({g[0], g[1], g[2], g[3]}, {g[4], g[5]}), &w)
                .ok());
  }
  for (int i = 0; i < 6; ++i) {
    const float got = i < 4 ? w.at("a").data()[i] : w.at("b").data()[i - 4];
    CHECK(got == Approx(ref[i].w).margin(1e-5));
  }
  // Warmup from 0.01 (at t = 0) to 0.1 (at t = 3), then cosine to 0 at
  // the last update.
  CHECK(LrFactor(o.schedule, 1) == Approx(0.4));
  CHECK(LrFactor(o.schedule, 3) == Approx(1.0));
  CHECK(LrFactor(o.schedule, 10) == Approx(0.0).margin(1e-12));
}

TEST_CASE("a mismatched or missing tensor changes nothing") {
  auto opt = LocalOptimizer::Create(ps::OptimizerOptions(), Specs());
  REQUIRE(opt.ok());
  NamedTensors w = Tensors({1, 2, 3, 4}, {5, 6});
  NamedTensors wrong = Tensors({1, 1, 1, 1}, {1, 1});
  wrong.at("b") = Tensor({3});
  absl::Status s = (*opt)->Apply(wrong, &w);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("'b'") != std::string::npos);
  NamedTensors missing = Tensors({1, 1, 1, 1}, {1, 1});
  missing.erase("a");
  CHECK((*opt)->Apply(missing, &w).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK((*opt)->steps() == 0);
  CHECK(w.at("a").data()[0] == 1.0f);
}

TEST_CASE("bad options are refused naming the field") {
  ps::OptimizerOptions o;
  o.kind = ps::OptimizerOptions::Kind::kMomentum;
  o.learning_rate = 0.1;
  o.momentum = 1.0;
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> r =
      LocalOptimizer::Create(o, Specs());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("momentum") != std::string::npos);
  o.momentum = 0.9;
  o.no_weight_decay = {"c"};
  r = LocalOptimizer::Create(o, Specs());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("'c'") != std::string::npos);
  o = ps::OptimizerOptions();
  o.learning_rate = 0;
  CHECK(LocalOptimizer::Create(o, Specs()).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
