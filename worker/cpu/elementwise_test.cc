// ReLU, per-channel bias, add, copy, global average pooling and L2 weight
// decay: forward values, and gradients
// against central finite differences of float64 references. Inputs keep
// away from ReLU's kink. Tolerance: relative error below 1e-4.
#include "worker/cpu/elementwise.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "common/thread_pool.h"
#include "worker/backend/backend.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using testing::Download;
using testing::Upload;
using testing::Zeros;

TEST_CASE("relu forward and backward, also in place") {
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (int64_t n : {1, 7, 100000}) {
      INFO(name << " n " << n);
      const auto x = testing::RandomAwayFromZero(n, 21, -1, 1, 0.01f);
      const auto r = testing::RandomValues(n, 22, -1, 1);
      DeviceTensor dx = Upload(backend.get(), x, {n});
      DeviceTensor y = Zeros(backend.get(), {n});
      REQUIRE_OK(backend->ReluForward(dx.view(), y.view()));
      const auto xd = testing::ToDouble(x);
      CHECK(testing::MaxRelativeDifference(Download(backend.get(), y.view()),
                                           reference::Relu(xd)) == 0.0);
      DeviceTensor g = Upload(backend.get(), r, {n});
      // In place: dx overwrites dy.
      REQUIRE_OK(backend->ReluBackward(y.view(), g.view(), g.view()));
      auto e = testing::CompareGradient(
          [&](const auto& v) { return testing::Dot(reference::Relu(v), r); },
          xd, Download(backend.get(), g.view()), 1e-3);
      INFO(e.ToString());
      CHECK(e.relative() < 1e-4);
      // In place forward.
      REQUIRE_OK(backend->ReluForward(dx.view(), dx.view()));
      CHECK(Download(backend.get(), dx.view()) ==
            Download(backend.get(), y.view()));
    }
  }
}

TEST_CASE("relu refuses mismatched shapes") {
  auto backend = testing::MakeBackend("cpu");
  DeviceTensor a = Zeros(backend.get(), {2, 3});
  DeviceTensor b = Zeros(backend.get(), {3, 2});
  CHECK(backend->ReluForward(a.view(), b.view()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(backend->ReluBackward(a.view(), a.view(), b.view()).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("L2 weight decay adds decay * w and returns decay * sum(w^2) / 2") {
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    const auto w = testing::RandomValues(1000, 23, -1, 1);
    const auto g = testing::RandomValues(1000, 24, -1, 1);
    DeviceTensor dw = Upload(backend.get(), w, {10, 100});
    DeviceTensor dg = Upload(backend.get(), g, {10, 100});
    const double loss =
        testing::Unwrap(backend->L2WeightDecay(dw.view(), 0.004f, dg.view()));
    const auto wd = testing::ToDouble(w);
    CHECK(loss == Approx(0.004 * reference::L2Loss(wd)).epsilon(1e-6));
    const auto out = Download(backend.get(), dg.view());
    // The gradient of decay * l2_loss, by finite differences.
    std::vector<float> added(out.size());
    for (size_t i = 0; i < out.size(); ++i) added[i] = out[i] - g[i];
    auto e = testing::CompareGradient(
        [](const auto& v) { return 0.004 * reference::L2Loss(v); }, wd, added);
    INFO(e.ToString());
    CHECK(e.relative() < 1e-4);
  }
}

TEST_CASE("bias add and its gradient, over images and matrices") {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (auto [n, c, inner] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                               {2, 3, 5},
                               {4, 64, 144},
                               {128, 10, 1}}) {
      INFO("threads " << threads << " n " << n << " c " << c << " inner "
                      << inner);
      const auto b = testing::RandomValues(c, 25, -1, 1);
      const auto y0 = testing::RandomValues(n * c * inner, 26, -1, 1);
      std::vector<float> y = y0;
      BiasAddKernel(n, c, inner, b.data(), y.data(), &pool);
      bool exact = true;
      for (int64_t i = 0; i < n * c * inner; ++i) {
        exact &= y[i] == y0[i] + b[(i / inner) % c];
      }
      CHECK(exact);
      // db of sum(r * (y0 + b)) is the per-channel sum of r.
      std::vector<float> db(c);
      BiasGradKernel(n, c, inner, y0.data(), db.data(), &pool);
      auto e = testing::CompareGradient(
          [&, n = n, c = c, inner = inner](const auto& bias) {
            double s = 0;
            for (int64_t i = 0; i < n * c * inner; ++i) {
              s += y0[i] * bias[(i / inner) % c];
            }
            return s;
          },
          testing::ToDouble(b), db);
      INFO(e.ToString());
      CHECK(e.relative() < 1e-4);
    }
  }
}

TEST_CASE("add, add with its ReLU, and copy, also in place") {
  auto backend = testing::MakeBackend("cpu");
  Backend* b = backend.get();
  for (int64_t n : {1, 7, 100000}) {
    INFO("n " << n);
    const auto x = testing::RandomValues(n, 31, -1, 1);
    const auto z = testing::RandomValues(n, 32, -1, 1);
    DeviceTensor dx = Upload(b, x, {n});
    DeviceTensor dz = Upload(b, z, {n});
    DeviceTensor y = Zeros(b, {n});
    REQUIRE_OK(b->AddRelu(dx.view(), dz.view(), y.view()));
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = std::max(x[i] + z[i], 0.0f);
    CHECK(Download(b, y.view()) == want);
    REQUIRE_OK(b->Add(dx.view(), dz.view(), y.view()));
    for (int64_t i = 0; i < n; ++i) want[i] = x[i] + z[i];
    CHECK(Download(b, y.view()) == want);
    REQUIRE_OK(b->Add(dx.view(), dz.view(), dx.view()));
    CHECK(Download(b, dx.view()) == want);
    REQUIRE_OK(b->AddRelu(dx.view(), dz.view(), dz.view()));
    for (int64_t i = 0; i < n; ++i) want[i] = std::max(want[i] + z[i], 0.0f);
    CHECK(Download(b, dz.view()) == want);
    REQUIRE_OK(b->Copy(dx.view(), y.view()));
    CHECK(Download(b, y.view()) == Download(b, dx.view()));
  }
  DeviceTensor a = Zeros(b, {2, 3}), c = Zeros(b, {3, 2});
  CHECK(b->Add(a.view(), c.view(), a.view()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(b->AddRelu(a.view(), c.view(), a.view()).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("global average pooling forward and backward") {
  auto backend = testing::MakeBackend("cpu");
  Backend* b = backend.get();
  for (const Shape& s : {Shape{1, 1, 1, 1}, Shape{2, 3, 4, 4},
                         Shape{3, 5, 7, 2}, Shape{4, 64, 8, 8}}) {
    INFO(ShapeToString(s));
    const int64_t rows = s[0] * s[1], inner = s[2] * s[3];
    const auto x = testing::RandomValues(NumElements(s), 33, -1, 1);
    const auto r = testing::RandomValues(rows, 34, -1, 1);
    DeviceTensor dx = Upload(b, x, s);
    DeviceTensor y = Zeros(b, {s[0], s[1]});
    REQUIRE_OK(b->GlobalAvgPoolForward(dx.view(), 0, y.view()));
    const auto xd = testing::ToDouble(x);
    CHECK(testing::MaxRelativeDifference(
              Download(b, y.view()),
              reference::GlobalAvgPool(rows, inner, xd)) < 1e-6);
    DeviceTensor dy = Upload(b, r, {s[0], s[1]});
    REQUIRE_OK(b->GlobalAvgPoolBackward(dy.view(), 0, dx.view()));
    auto e = testing::CompareGradient(
        [&](const auto& v) {
          return testing::Dot(reference::GlobalAvgPool(rows, inner, v), r);
        },
        xd, Download(b, dx.view()));
    INFO(e.ToString());
    CHECK(e.relative() < 1e-4);
  }
  DeviceTensor x = Zeros(b, {2, 3, 4, 4}), y = Zeros(b, {2, 4});
  CHECK(b->GlobalAvgPoolForward(x.view(), 0, y.view()).code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
