// The layer-graph networks' ops on the GPU against the CPU backend, and
// whole networks:
//   - batch norm (training forward with the batch statistics and the
//     running-statistics update, inference, backward; with and without the
//     fused ReLU; dx in place on dy), the residual add, copy and global
//     average pooling on random inputs, within kFloat32Tolerance (dx
//     against the size of its terms, which it may cancel to);
//   - one training step of resnet20 and cnn10 through the Model API at
//     batch 4: the loss within kFloat32Tolerance, every gradient within
//     kTieTolerance (a ReLU input within float32 rounding of zero may go
//     either way on the two backends; model_test_inputs.h), the running
//     statistics after the step within kFloat32Tolerance, and the
//     inference logits after it.
// The ResNets' strided, padded, bias-free convolutions are in
// gpu_conv2d_test.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "worker/backend/backend.h"
#include "worker/gpu/tests/gpu_testing.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"
#include "worker/random.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Comparison;
using testing::Download;
using testing::RelativeError;
using testing::Unwrap;
using testing::Upload;
using testing::Values;
using testing::Zeros;

struct BnResults {
  std::vector<float> y, mean, var, running_mean, running_var, inference, dx,
      dgamma, dbeta;
};

BnResults RunBatchNorm(Backend* backend, const BatchNormShape& s,
                       const std::vector<float>& x,
                       const std::vector<float>& gamma,
                       const std::vector<float>& beta,
                       const std::vector<float>& dy) {
  auto op = Unwrap(backend->CreateBatchNorm(s));
  const Shape c = s.params();
  DeviceTensor tx = Upload(backend, x, s.input());
  DeviceTensor tg = Upload(backend, gamma, c);
  DeviceTensor tb = Upload(backend, beta, c);
  DeviceTensor y = Zeros(backend, s.input());
  DeviceTensor mean = Zeros(backend, c), var = Zeros(backend, c);
  DeviceTensor rm = Zeros(backend, c);
  DeviceTensor rv = Upload(backend, std::vector<float>(s.channels, 1.0f), c);
  REQUIRE_OK(op->ForwardTraining(tx.view(), tg.view(), tb.view(), y.view(),
                                 mean.view(), var.view(), rm.view(),
                                 rv.view()));
  DeviceTensor inference = Zeros(backend, s.input());
  REQUIRE_OK(op->ForwardInference(tx.view(), tg.view(), tb.view(), rm.view(),
                                  rv.view(), inference.view()));
  // dx in place on dy, as the network engine may run it.
  DeviceTensor dxy = Upload(backend, dy, s.input());
  DeviceTensor dgamma = Zeros(backend, c), dbeta = Zeros(backend, c);
  REQUIRE_OK(op->Backward(tx.view(), y.view(), dxy.view(), tg.view(),
                          mean.view(), var.view(), dxy.view(), dgamma.view(),
                          dbeta.view()));
  BnResults r;
  r.y = Download(backend, y.view());
  r.mean = Download(backend, mean.view());
  r.var = Download(backend, var.view());
  r.running_mean = Download(backend, rm.view());
  r.running_var = Download(backend, rv.view());
  r.inference = Download(backend, inference.view());
  r.dx = Download(backend, dxy.view());
  r.dgamma = Download(backend, dgamma.view());
  r.dbeta = Download(backend, dbeta.view());
  return r;
}

TEST_CASE("gpu batch norm matches the cpu backend") {
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend("gpu:0");
  uint64_t seed = 1;
  for (bool relu : {false, true}) {
    for (const Shape& dims : std::vector<Shape>{
             {1, 1, 1, 2}, {4, 16, 8, 8}, {3, 5, 7, 9}, {8, 64, 4, 4}}) {
      BatchNormShape s;
      s.batch = dims[0];
      s.channels = dims[1];
      s.height = dims[2];
      s.width = dims[3];
      s.relu = relu;
      INFO(s.ToString());
      const auto x =
          testing::RandomValues(NumElements(s.input()), seed++, -2, 3);
      const auto gamma = testing::RandomValues(s.channels, seed++, 0.5, 1.5);
      const auto beta = testing::RandomValues(s.channels, seed++, -0.5, 0.5);
      const auto dy =
          testing::RandomValues(NumElements(s.input()), seed++, -1, 1);
      const BnResults want = RunBatchNorm(cpu.get(), s, x, gamma, beta, dy);
      const BnResults got = RunBatchNorm(gpu.get(), s, x, gamma, beta, dy);
      const double tol = testing::kFloat32Tolerance;
      CHECK(RelativeError(got.y, want.y) < tol);
      CHECK(RelativeError(got.mean, want.mean) < tol);
      CHECK(RelativeError(got.var, want.var) < tol);
      CHECK(RelativeError(got.running_mean, want.running_mean) < tol);
      CHECK(RelativeError(got.running_var, want.running_var) < tol);
      CHECK(RelativeError(got.inference, want.inference) < tol);
      // dx = gamma / sigma * (dy - mean(dy) - xhat * mean(dy * xhat)):
      // measured against the size of its terms, not of dx itself, which
      // they may cancel to (with two values a channel, xhat is +-1 and dx
      // is 0 exactly: both backends then leave a float32 residue of the
      // terms' size times epsilon, 4e-7 on an H200, and relative to the
      // largest residue the two differed by 4%).
      double dx_terms = 0.0;
      for (int k = 0; k < s.channels; ++k) {
        const double sigma = std::sqrt(double{want.var[k]} + double{s.epsilon});
        dx_terms = std::max(dx_terms, std::abs(double{gamma[k]}) / sigma);
      }
      double dy_max = 0.0;
      for (float v : dy) dy_max = std::max(dy_max, std::abs(double{v}));
      Comparison dx = RelativeError(got.dx, want.dx);
      dx.scale = std::max(dx.scale, dx_terms * dy_max);
      CHECK(dx < tol);
      CHECK(RelativeError(got.dgamma, want.dgamma) < tol);
      CHECK(RelativeError(got.dbeta, want.dbeta) < tol);
    }
  }
}

TEST_CASE(
    "gpu add, add with its relu, copy and global average pooling match the "
    "cpu backend") {
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend("gpu:0");
  const Shape x_shape = {3, 5, 7, 9}, y_shape = {3, 5};
  const auto a = testing::RandomValues(NumElements(x_shape), 1, -1, 1);
  const auto b = testing::RandomValues(NumElements(x_shape), 2, -1, 1);
  const auto g = testing::RandomValues(NumElements(y_shape), 3, -1, 1);
  std::vector<float> want[5], got[5];
  for (int k = 0; k < 2; ++k) {
    Backend* be = k == 0 ? cpu.get() : gpu.get();
    std::vector<float>* out = k == 0 ? want : got;
    DeviceTensor ta = Upload(be, a, x_shape), tb = Upload(be, b, x_shape);
    DeviceTensor sum = Zeros(be, x_shape), copy = Zeros(be, x_shape);
    DeviceTensor pooled = Zeros(be, y_shape), tg = Upload(be, g, y_shape);
    DeviceTensor spread = Zeros(be, x_shape);
    REQUIRE_OK(be->Add(ta.view(), tb.view(), sum.view()));
    REQUIRE_OK(be->Add(sum.view(), tb.view(), sum.view()));  // in place
    DeviceTensor relu = Zeros(be, x_shape);
    REQUIRE_OK(be->AddRelu(ta.view(), tb.view(), relu.view()));
    out[4] = Download(be, relu.view());
    REQUIRE_OK(be->Copy(ta.view(), copy.view()));
    REQUIRE_OK(be->GlobalAvgPoolForward(ta.view(), 0, pooled.view()));
    REQUIRE_OK(be->GlobalAvgPoolBackward(tg.view(), 0, spread.view()));
    out[0] = Download(be, sum.view());
    out[1] = Download(be, copy.view());
    out[2] = Download(be, pooled.view());
    out[3] = Download(be, spread.view());
  }
  for (int i = 0; i < 5; ++i) {
    INFO("output " << i);
    CHECK(RelativeError(got[i], want[i]) < testing::kFloat32Tolerance);
  }
  CHECK(got[1] == a);  // a copy is exact
}

TEST_CASE("gpu training steps of resnet20 and cnn10 match the cpu backend") {
  auto cpu = testing::MakeBackend("cpu");
  auto gpu = testing::MakeGpuBackend("gpu:0");
  for (const std::string name : {"resnet20", "cnn10"}) {
    INFO(name);
    auto cpu_model = Unwrap(CreateModel(name, cpu.get()));
    auto gpu_model = Unwrap(CreateModel(name, gpu.get()));
    const NamedTensors weights = InitialValues(cpu_model->variables(), 5);
    const int64_t n = 4;
    Shape shape = cpu_model->image_shape();
    shape.insert(shape.begin(), n);
    Tensor images(shape);
    Rng rng(11);
    for (float& v : images.span()) v = static_cast<float>(rng.Normal());
    const std::vector<int32_t> labels = {3, 1, 4, 1};
    NamedTensors cpu_grads, gpu_grads;
    const StepResult a = Unwrap(cpu_model->ComputeGradients(
        ViewsOf(weights), images.view(), labels, &cpu_grads));
    const StepResult b = Unwrap(gpu_model->ComputeGradients(
        ViewsOf(weights), images.view(), labels, &gpu_grads));
    INFO("plans:\n" << testing::PlanNotes(*gpu));
    CHECK(b.loss == Approx(a.loss).epsilon(testing::kFloat32Tolerance));
    for (const VariableSpec& v : cpu_model->variables()) {
      INFO(v.name);
      CHECK(RelativeError(Values(gpu_grads.at(v.name)),
                          Values(cpu_grads.at(v.name))) <
            testing::kTieTolerance);
    }
    NamedTensors cpu_state, gpu_state;
    REQUIRE_OK(cpu_model->GetState(&cpu_state));
    REQUIRE_OK(gpu_model->GetState(&gpu_state));
    for (const VariableSpec& v : cpu_model->state()) {
      INFO(v.name);
      CHECK(RelativeError(Values(gpu_state.at(v.name)),
                          Values(cpu_state.at(v.name))) <
            testing::kFloat32Tolerance);
    }
    Tensor cpu_logits({n, 10}), gpu_logits({n, 10});
    REQUIRE_OK(
        cpu_model->Logits(ViewsOf(weights), images.view(), cpu_logits.view()));
    REQUIRE_OK(
        gpu_model->Logits(ViewsOf(weights), images.view(), gpu_logits.view()));
    CHECK(RelativeError(Values(gpu_logits), Values(cpu_logits)) <
          testing::kTieTolerance);
  }
}

}  // namespace
}  // namespace psgd
