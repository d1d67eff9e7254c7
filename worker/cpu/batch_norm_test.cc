// Batch normalisation (plain and fused with ReLU): the training forward's
// output and batch statistics and the inference forward against the float64
// reference, PyTorch's running-statistics update (momentum, unbiased
// variance), and the backward's three gradients against central finite
// differences of the reference. Tolerance: relative error below 1e-4.
#include <catch2/catch.hpp>

#include "worker/backend/backend.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using testing::Download;
using testing::ToDouble;
using testing::Unwrap;
using testing::Upload;
using testing::Zeros;

constexpr double kTolerance = 1e-4;

BatchNormShape Bn(int64_t n, int64_t c, int64_t h, int64_t w, bool relu) {
  BatchNormShape s;
  s.batch = n;
  s.channels = c;
  s.height = h;
  s.width = w;
  s.relu = relu;
  return s;
}

TEST_CASE("batch norm forward, running statistics and backward") {
  auto backend = testing::MakeBackend("cpu");
  Backend* b = backend.get();
  for (const BatchNormShape& s :
       {Bn(2, 3, 4, 4, false), Bn(2, 3, 4, 4, true), Bn(3, 5, 3, 2, false),
        Bn(4, 2, 1, 1, true), Bn(1, 4, 5, 3, true), Bn(8, 16, 32, 32, false)}) {
    INFO(s.ToString());
    const int64_t c = s.channels;
    const int64_t count = NumElements(s.input());
    // Per-channel offsets and scales, so that the statistics differ.
    std::vector<float> x = testing::RandomValues(count, 1, -1, 1);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t ch = (i / (s.height * s.width)) % c;
      x[i] = x[i] * (1.0f + 0.5f * ch) + 0.3f * ch;
    }
    const auto gamma = testing::RandomValues(c, 2, 0.5, 1.5);
    const auto beta = testing::RandomValues(c, 3, -0.5, 0.5);
    const auto r = testing::RandomValues(count, 4, -1, 1);
    const auto run_mean0 = testing::RandomValues(c, 5, -0.2, 0.2);
    const auto run_var0 = testing::RandomValues(c, 6, 0.5, 1.5);

    auto op = Unwrap(b->CreateBatchNorm(s));
    DeviceTensor dx_in = Upload(b, x, s.input());
    DeviceTensor dgamma_in = Upload(b, gamma, s.params());
    DeviceTensor dbeta_in = Upload(b, beta, s.params());
    DeviceTensor y = Zeros(b, s.input());
    DeviceTensor mean = Zeros(b, s.params()), var = Zeros(b, s.params());
    DeviceTensor run_mean = Upload(b, run_mean0, s.params());
    DeviceTensor run_var = Upload(b, run_var0, s.params());
    REQUIRE_OK(op->ForwardTraining(
        dx_in.view(), dgamma_in.view(), dbeta_in.view(), y.view(), mean.view(),
        var.view(), run_mean.view(), run_var.view()));
    const auto xd = ToDouble(x), gd = ToDouble(gamma), bd = ToDouble(beta);
    reference::Vec ref_mean, ref_var;
    const reference::Vec ref_y =
        reference::BatchNormTraining(s, xd, gd, bd, &ref_mean, &ref_var);
    CHECK(testing::MaxRelativeDifference(Download(b, y.view()), ref_y) < 1e-5);
    CHECK(testing::MaxRelativeDifference(Download(b, mean.view()), ref_mean) <
          1e-5);
    CHECK(testing::MaxRelativeDifference(Download(b, var.view()), ref_var) <
          1e-5);
    // r = 0.9 r + 0.1 stat, the variance unbiased by M / (M - 1).
    const double m = static_cast<double>(count / c);
    reference::Vec want_mean(c), want_var(c);
    for (int64_t i = 0; i < c; ++i) {
      want_mean[i] = 0.9 * run_mean0[i] + 0.1 * ref_mean[i];
      want_var[i] = 0.9 * run_var0[i] + 0.1 * ref_var[i] * m / (m - 1);
    }
    CHECK(testing::MaxRelativeDifference(Download(b, run_mean.view()),
                                         want_mean) < 1e-5);
    CHECK(testing::MaxRelativeDifference(Download(b, run_var.view()),
                                         want_var) < 1e-5);

    // Inference with the running statistics.
    DeviceTensor yi = Zeros(b, s.input());
    REQUIRE_OK(op->ForwardInference(dx_in.view(), dgamma_in.view(),
                                    dbeta_in.view(), run_mean.view(),
                                    run_var.view(), yi.view()));
    CHECK(testing::MaxRelativeDifference(
              Download(b, yi.view()), reference::BatchNormInference(
                                          s, xd, gd, bd, want_mean, want_var)) <
          1e-5);

    // Backward, once into a separate dx and once in place over dy.
    DeviceTensor dy = Upload(b, r, s.input());
    DeviceTensor gx = Zeros(b, s.input());
    DeviceTensor gg = Zeros(b, s.params()), gb = Zeros(b, s.params());
    REQUIRE_OK(op->Backward(dx_in.view(), y.view(), dy.view(), dgamma_in.view(),
                            mean.view(), var.view(), gx.view(), gg.view(),
                            gb.view()));
    auto ex = testing::CompareGradient(
        [&](const auto& v) {
          return testing::Dot(reference::BatchNormTraining(s, v, gd, bd), r);
        },
        xd, Download(b, gx.view()));
    INFO("dx " << ex.ToString());
    CHECK(ex.relative() < kTolerance);
    auto eg = testing::CompareGradient(
        [&](const auto& v) {
          return testing::Dot(reference::BatchNormTraining(s, xd, v, bd), r);
        },
        gd, Download(b, gg.view()));
    INFO("dgamma " << eg.ToString());
    CHECK(eg.relative() < kTolerance);
    auto eb = testing::CompareGradient(
        [&](const auto& v) {
          return testing::Dot(reference::BatchNormTraining(s, xd, gd, v), r);
        },
        bd, Download(b, gb.view()));
    INFO("dbeta " << eb.ToString());
    CHECK(eb.relative() < kTolerance);
    const std::vector<float> separate = Download(b, gx.view());
    REQUIRE_OK(op->Backward(dx_in.view(), y.view(), dy.view(), dgamma_in.view(),
                            mean.view(), var.view(), dy.view(), gg.view(),
                            gb.view()));
    CHECK(Download(b, dy.view()) == separate);
  }
}

TEST_CASE("batch norm refuses views of another shape and invalid plans") {
  auto backend = testing::MakeBackend("cpu");
  const BatchNormShape s = Bn(2, 3, 4, 4, false);
  auto op = Unwrap(backend->CreateBatchNorm(s));
  DeviceTensor x = Zeros(backend.get(), s.input());
  DeviceTensor p = Zeros(backend.get(), s.params());
  DeviceTensor wrong = Zeros(backend.get(), {4});
  absl::Status st =
      op->ForwardTraining(x.view(), p.view(), wrong.view(), x.view(), p.view(),
                          p.view(), p.view(), p.view());
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(st.message().find("beta: shape [4]") != absl::string_view::npos);
  CHECK(backend->CreateBatchNorm(Bn(2, 0, 4, 4, false)).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
