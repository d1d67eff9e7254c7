// The tutorial model against an independent naive float64 reference built in
// this test from the reference ops: logits within 1e-4, the loss, and every
// variable's gradient against central finite differences of the reference
// loss (sampled coordinates, relative error below 1e-3). Also the registry,
// initial values and the refusal of bad inputs.
#include "worker/models/cifar10_tutorial.h"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "common/model_names.h"
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

constexpr int kNumVars = 10;
using RefWeights = std::array<Vec, kNumVars>;

// The network of cifar10_tutorial.h, op by op, in float64.
Vec RefLogits(int64_t n, const Vec& images, const RefWeights& w) {
  const LrnParams lrn;
  Vec a1 = reference::Relu(
      reference::Conv2d({n, 3, 24, 24, 64, 5, 5}, images, w[0], w[1]));
  Vec p1 = reference::MaxPool({n, 64, 24, 24, 3, 2}, a1);
  Vec n1 = reference::Lrn({n, 64, 12, 12, lrn}, p1);
  Vec a2 = reference::Relu(
      reference::Conv2d({n, 64, 12, 12, 64, 5, 5}, n1, w[2], w[3]));
  Vec n2 = reference::Lrn({n, 64, 12, 12, lrn}, a2);
  Vec p2 = reference::MaxPool({n, 64, 12, 12, 3, 2}, n2);
  Vec h3 = reference::Relu(reference::Dense({n, 2304, 384}, p2, w[4], w[5]));
  Vec h4 = reference::Relu(reference::Dense({n, 384, 192}, h3, w[6], w[7]));
  return reference::Dense({n, 192, 10}, h4, w[8], w[9]);
}

double RefLoss(int64_t n, const Vec& images, const std::vector<int32_t>& labels,
               const RefWeights& w) {
  return reference::SoftmaxCrossEntropy(n, 10, RefLogits(n, images, w),
                                        labels) +
         0.004 * (reference::L2Loss(w[4]) + reference::L2Loss(w[6]));
}

struct Fixture {
  std::unique_ptr<Backend> backend = testing::MakeBackend("cpu");
  std::unique_ptr<Model> model =
      Unwrap(CreateModel("cifar10_tutorial", backend.get()));
  NamedTensors weights = InitialValues(Cifar10TutorialVariables(), 7);

  Fixture() {
    // Non-zero biases, so that every bias path is exercised; drawn in the
    // variable list's order, since the map's order changes from process to
    // process (absl's hash is seeded per process) and the inputs must not.
    Rng rng(3);
    for (const VariableSpec& s : Cifar10TutorialVariables()) {
      if (s.name.find("biases") == std::string::npos) continue;
      for (float& v : weights.at(s.name).span()) {
        v = static_cast<float>(rng.Uniform(-0.2, 0.2));
      }
    }
  }
  RefWeights Ref() const {
    RefWeights r;
    const auto specs = Cifar10TutorialVariables();
    for (int i = 0; i < kNumVars; ++i) {
      const Tensor& t = weights.at(specs[i].name);
      r[i] = Vec(t.data(), t.data() + t.size());
    }
    return r;
  }
};

// Images of the scale the tutorial's LRN matters at.
Tensor Images(int64_t n, uint64_t seed) {
  Tensor t({n, 3, 24, 24});
  Rng rng(seed);
  for (float& v : t.span()) v = static_cast<float>(rng.Uniform(-40, 40));
  return t;
}

TEST_CASE("the registry's names are the ones a config may give") {
  // common/model_names.h is what the config loader (and so the servers)
  // takes: the same names, in the same order.
  std::vector<std::string> listed;
  for (absl::string_view n : kRegistryModelNames) listed.emplace_back(n);
  CHECK(ModelNames() == listed);
}

TEST_CASE("the model has the shared variable list and is found by name") {
  // The registry's first two; the layer-graph networks follow
  // (network_model_test).
  const std::vector<std::string> names = ModelNames();
  REQUIRE(names.size() >= 2);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 2) ==
        std::vector<std::string>{"cifar10_tutorial", "cifar10_linear"});
  const auto specs = Unwrap(ModelVariables("cifar10_tutorial"));
  CHECK(TotalParameters(specs) == 1068298);
  Fixture f;
  CHECK(f.model->name() == "cifar10_tutorial");
  REQUIRE(f.model->variables().size() == specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    CHECK(f.model->variables()[i].name == specs[i].name);
    CHECK(f.model->variables()[i].shape == specs[i].shape);
  }
  CHECK(f.model->image_shape() == Shape{3, 24, 24});
  CHECK(f.model->num_classes() == 10);
  absl::Status s = ModelVariables("resnet").status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("known: cifar10_tutorial") != absl::string_view::npos);
  CHECK(CreateModel("resnet", f.backend.get()).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("forward logits match the naive float64 reference within 1e-4") {
  Fixture f;
  const int64_t n = 3;
  Tensor images = Images(n, 11);
  Tensor logits({n, 10});
  REQUIRE_OK(f.model->Logits(ViewsOf(f.weights), images.view(), logits.view()));
  const Vec ref =
      RefLogits(n, Vec(images.data(), images.data() + images.size()), f.Ref());
  double max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < n * 10; ++i) {
    max_diff = std::max(max_diff, std::abs(logits.data()[i] - ref[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  INFO("max |logit - reference| " << max_diff << ", max |logit| " << max_ref);
  CHECK(max_ref > 0.1);  // the comparison is not vacuous
  CHECK(max_diff < 1e-4);
}

TEST_CASE("loss and gradients match finite differences of the reference") {
  Fixture f;
  const int64_t n = 2;
  Tensor images = Images(n, 12);
  const std::vector<int32_t> labels = {3, 8};
  NamedTensors grads;
  StepResult r = Unwrap(f.model->ComputeGradients(
      ViewsOf(f.weights), images.view(), labels, &grads));
  const Vec x(images.data(), images.data() + images.size());
  RefWeights ref = f.Ref();
  CHECK(r.loss == Approx(RefLoss(n, x, labels, ref)).epsilon(1e-5));
  CHECK(r.examples == 2);
  CHECK(r.weight_decay > 0);
  CHECK(r.loss == Approx(r.cross_entropy + r.weight_decay));

  const auto specs = Cifar10TutorialVariables();
  REQUIRE(grads.size() == specs.size());
  for (int v = 0; v < kNumVars; ++v) {
    const Tensor& g = grads.at(specs[v].name);
    REQUIRE(g.shape() == specs[v].shape);
    double max_grad = 0;
    for (float x : g.span()) max_grad = std::max(max_grad, double{std::abs(x)});
    Rng rng(100 + v);
    double max_err = 0;
    for (int k = 0; k < 5; ++k) {
      const int64_t i = static_cast<int64_t>(rng.UniformInt(g.size()));
      const double h = 1e-5, saved = ref[v][i];
      ref[v][i] = saved + h;
      const double up = RefLoss(n, x, labels, ref);
      ref[v][i] = saved - h;
      const double down = RefLoss(n, x, labels, ref);
      ref[v][i] = saved;
      max_err =
          std::max(max_err, std::abs((up - down) / (2 * h) - g.data()[i]));
    }
    INFO(specs[v].name << ": max |error| " << max_err << ", max |gradient| "
                       << max_grad);
    CHECK(max_grad > 0);
    CHECK(max_err / max_grad < 1e-3);
  }
}

TEST_CASE("plans for several batch sizes give the same answers") {
  Fixture f;
  Tensor images = Images(2, 13);
  Tensor a({2, 10}), b({2, 10}), c({5, 10});
  REQUIRE_OK(f.model->Logits(ViewsOf(f.weights), images.view(), a.view()));
  Tensor five = Images(5, 14);
  REQUIRE_OK(f.model->Logits(ViewsOf(f.weights), five.view(), c.view()));
  REQUIRE_OK(f.model->Logits(ViewsOf(f.weights), images.view(), b.view()));
  for (int i = 0; i < 20; ++i) CHECK(a.data()[i] == b.data()[i]);
  const std::vector<int32_t> labels = {1, 2};
  StepResult e =
      Unwrap(f.model->Evaluate(ViewsOf(f.weights), images.view(), labels));
  CHECK(e.examples == 2);
  CHECK(e.weight_decay == 0);
  CHECK(e.loss == e.cross_entropy);
}

TEST_CASE(
    "hooks: weights awaited in forward order, gradients last layer "
    "first, and the same bits as without hooks") {
  Fixture f;
  const int64_t n = 4;
  Tensor images = Images(n, 15);
  const std::vector<int32_t> labels = {1, 5, 9, 0};
  NamedTensors plain;
  const StepResult a = Unwrap(f.model->ComputeGradients(
      ViewsOf(f.weights), images.view(), labels, &plain));
  // The hooked call starts from other weights and gets the real ones only
  // when it awaits them, as a worker whose pull is still arriving.
  NamedTensors arriving;
  for (const auto& [name, t] : f.weights) arriving[name] = Tensor(t.shape());
  const auto specs = Cifar10TutorialVariables();
  std::vector<std::string> events;
  NamedTensors hooked;
  StepHooks hooks;
  hooks.await_weights = [&](int v) {
    events.push_back("await " + specs[v].name);
    const Tensor& real = f.weights.at(specs[v].name);
    std::copy(real.data(), real.data() + real.size(),
              arriving.at(specs[v].name).data());
    return absl::OkStatus();
  };
  hooks.gradient_ready = [&](int v) {
    events.push_back("ready " + specs[v].name);
    // Final already: equal to the plain call's.
    const Tensor& g = hooked.at(specs[v].name);
    const Tensor& want = plain.at(specs[v].name);
    CHECK(std::equal(g.data(), g.data() + g.size(), want.data()));
  };
  const StepResult b = Unwrap(f.model->ComputeGradientsWithHooks(
      ViewsOf(arriving), images.view(), labels, &hooked, hooks));
  std::vector<std::string> want;
  for (int v = 0; v < kNumVars; ++v) want.push_back("await " + specs[v].name);
  for (int layer = kNumVars - 2; layer >= 0; layer -= 2) {
    want.push_back("ready " + specs[layer].name);
    want.push_back("ready " + specs[layer + 1].name);
  }
  CHECK(events == want);
  CHECK(a.loss == b.loss);
  CHECK(a.cross_entropy == b.cross_entropy);
  CHECK(a.weight_decay == b.weight_decay);
  CHECK(a.correct == b.correct);
  for (const VariableSpec& s : specs) {
    const Tensor& x = plain.at(s.name);
    const Tensor& y = hooked.at(s.name);
    INFO(s.name);
    CHECK(std::equal(x.data(), x.data() + x.size(), y.data()));
  }
  // An error from a hook ends the step with it.
  hooks.await_weights = [](int v) {
    return v == 4 ? absl::AbortedError("pull failed") : absl::OkStatus();
  };
  CHECK(absl::IsAborted(f.model
                            ->ComputeGradientsWithHooks(ViewsOf(arriving),
                                                        images.view(), labels,
                                                        &hooked, hooks)
                            .status()));
}

TEST_CASE("bad weights, images and labels are refused with the reason") {
  Fixture f;
  Tensor images = Images(2, 15);
  std::vector<int32_t> labels = {0, 1};
  NamedTensors grads;
  auto code_and_message = [&](NamedConstViews w, ConstTensorView im,
                              std::vector<int32_t> l) {
    absl::Status s = f.model->ComputeGradients(w, im, l, &grads).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  NamedConstViews w = ViewsOf(f.weights);
  w.erase("conv2/biases");
  CHECK_THAT(code_and_message(w, images.view(), labels),
             Catch::Contains("'conv2/biases' is missing"));
  w = ViewsOf(f.weights);
  w["conv2/biases"] =
      ConstTensorView(f.weights.at("conv1/weights").data(), {65});
  CHECK_THAT(code_and_message(w, images.view(), labels),
             Catch::Contains("'conv2/biases' has shape [65]"));
  w = ViewsOf(f.weights);
  w["conv3/weights"] = w["conv2/biases"];
  CHECK_THAT(code_and_message(w, images.view(), labels),
             Catch::Contains("'conv3/weights' is not a variable"));
  w = ViewsOf(f.weights);
  CHECK_THAT(code_and_message(w, ConstTensorView(images.data(), {2, 3, 24, 23}),
                              labels),
             Catch::Contains("expected [N, 3, 24, 24]"));
  CHECK_THAT(code_and_message(w, images.view(), {0}),
             Catch::Contains("1 labels for 2 images"));
  CHECK_THAT(code_and_message(w, images.view(), {0, 10}),
             Catch::Contains("label 10 of example 1"));
  CHECK(grads.empty());
}

TEST_CASE("initial values follow the specs and the seed") {
  const auto specs = Cifar10TutorialVariables();
  NamedTensors a = InitialValues(specs, 1), b = InitialValues(specs, 1),
               c = InitialValues(specs, 2);
  for (const VariableSpec& s : specs) {
    const Tensor& t = a.at(s.name);
    REQUIRE(t.shape() == s.shape);
    CHECK(std::equal(t.span().begin(), t.span().end(),
                     b.at(s.name).span().begin()));
    if (s.init.kind == Initializer::Kind::kConstant) {
      for (float v : t.span()) CHECK(v == s.init.value);
      continue;
    }
    CHECK(!std::equal(t.span().begin(), t.span().end(),
                      c.at(s.name).span().begin()));
    double sum = 0, sq = 0, max_abs = 0;
    for (float v : t.span()) {
      sum += v;
      sq += double{v} * v;
      max_abs = std::max(max_abs, double{std::abs(v)});
    }
    const double n = static_cast<double>(t.size());
    INFO(s.name);
    CHECK(max_abs <= 2.0 * s.init.stddev * (1 + 1e-6));
    CHECK(std::abs(sum / n) < 0.05 * s.init.stddev);
    // A normal truncated at two deviations has 0.8796 of the deviation.
    CHECK(std::sqrt(sq / n) == Approx(0.8796 * s.init.stddev).epsilon(0.05));
  }
}

}  // namespace
}  // namespace psgd
