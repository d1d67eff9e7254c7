// Convolution forward against a float64 reference, and both backward passes
// against central finite differences of that reference, for every CPU
// kernel choice and edge shapes (batch 1, odd sizes, even kernels, kernels
// larger than the image). Tolerance: relative error below 1e-4.
#include <catch2/catch.hpp>
#include <cmath>

#include "worker/backend/backend.h"
#include "worker/backend_factory/factory.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using testing::Unwrap;
using testing::Zeros;

constexpr double kTolerance = 1e-4;

Conv2dShape Conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o,
                 int64_t kh, int64_t kw) {
  return Conv2dShape{n, c, h, w, o, kh, kw};
}

TEST_CASE("conv2d forward and backward match the float64 reference") {
  const std::vector<Conv2dShape> shapes = {
      Conv(1, 1, 1, 1, 1, 1, 1), Conv(1, 3, 5, 7, 4, 5, 5),
      Conv(2, 3, 6, 6, 5, 3, 3), Conv(2, 2, 5, 4, 3, 4, 4),
      Conv(3, 8, 3, 2, 6, 5, 5), Conv(2, 16, 6, 6, 16, 5, 5),
  };
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    for (const Conv2dShape& s : shapes) {
      INFO(name << " " << s.ToString());
      auto op = Unwrap(backend->CreateConv2d(s));
      testing::CheckWeightedLayer(
          backend.get(),
          {s.input(), s.filter(), s.bias(), s.output(),
           [&](auto x, auto w, auto b, auto y) {
             return op->Forward(x, w, b, y);
           },
           [&](auto dy, auto w, auto dx) {
             return op->BackwardData(dy, w, dx);
           },
           [&](auto x, auto dy, auto dw, auto db) {
             return op->BackwardFilter(x, dy, dw, db);
           },
           [&](const auto& x, const auto& w, const auto& b) {
             return reference::Conv2d(s, x, w, b);
           }},
          kTolerance);
    }
  }
}

// The ResNets' convolutions: stride 1 or 2, symmetric padding (PyTorch's),
// no bias; oneDNN only (the im2col kernel refuses them).
TEST_CASE("strided, padded conv2d without a bias matches the reference") {
  auto resnet_conv = [](int64_t n, int64_t c, int64_t hw, int64_t o, int64_t k,
                        int64_t stride, int64_t pad) {
    Conv2dShape s = Conv(n, c, hw, hw, o, k, k);
    s.stride = stride;
    s.padding = pad;
    s.has_bias = false;
    return s;
  };
  std::vector<Conv2dShape> shapes = {
      resnet_conv(2, 3, 8, 4, 3, 1, 1), resnet_conv(2, 4, 8, 6, 3, 2, 1),
      resnet_conv(2, 4, 8, 6, 1, 2, 0), resnet_conv(1, 3, 7, 5, 3, 2, 1),
      resnet_conv(2, 5, 5, 4, 1, 1, 0)};
  Conv2dShape with_bias = Conv(2, 3, 6, 6, 4, 3, 3);
  with_bias.stride = 2;
  with_bias.padding = 1;
  shapes.push_back(with_bias);
  auto backend = testing::MakeBackend("cpu");
  for (const Conv2dShape& s : shapes) {
    INFO(s.ToString());
    auto op = Unwrap(backend->CreateConv2d(s));
    testing::CheckWeightedLayer(
        backend.get(),
        {s.input(), s.filter(), s.bias(), s.output(),
         [&](auto x, auto w, auto b, auto y) {
           return op->Forward(x, w, b, y);
         },
         [&](auto dy, auto w, auto dx) { return op->BackwardData(dy, w, dx); },
         [&](auto x, auto dy, auto dw, auto db) {
           return op->BackwardFilter(x, dy, dw, db);
         },
         [&](const auto& x, const auto& w, const auto& b) {
           return reference::Conv2d(s, x, w, b);
         }},
        kTolerance);
  }
  CHECK(shapes[1].output() == Shape{2, 6, 4, 4});
  auto im2col = testing::MakeBackend("cpu:conv=im2col");
  CHECK(im2col->CreateConv2d(shapes[1]).status().code() ==
        absl::StatusCode::kUnimplemented);
}

// bfloat16 compute (cpu:compute=bf16, the direct kernel everywhere): the
// inputs rounded to 8 bits of mantissa, float32 accumulation; every result
// within bfloat16's rounding of float32's, in NCHW and in channel blocks.
// On a CPU without AVX-512 BF16 the backend is refused instead.
TEST_CASE("conv2d in bfloat16 compute stays within bfloat16's rounding") {
  BackendOptions options;
  options.threads = 2;
  absl::StatusOr<std::unique_ptr<Backend>> made =
      CreateBackend("cpu:compute=bf16,conv=onednn", options);
  CHECK(
      CreateBackend("cpu:compute=bf16,conv=im2col", options).status().code() ==
      absl::StatusCode::kInvalidArgument);
  if (!made.ok()) {
    CHECK(made.status().code() == absl::StatusCode::kFailedPrecondition);
    WARN("no AVX-512 BF16 here: " << made.status().ToString());
    return;
  }
  Backend* bf = made->get();
  auto f32 = testing::MakeBackend("cpu");
  Conv2dShape s = Conv(4, 16, 8, 8, 32, 3, 3);
  s.padding = 1;
  Conv2dShape blocked = s;
  blocked.in_block = blocked.out_block = bf->ChannelBlock();
  for (const Conv2dShape& shape : {Conv(2, 3, 6, 6, 16, 3, 3), s, blocked}) {
    INFO(shape.ToString());
    auto a = Unwrap(f32->CreateConv2d(shape));
    auto b = Unwrap(bf->CreateConv2d(shape));
    const auto x = testing::RandomValues(NumElements(shape.input()), 1, -1, 1);
    const auto w = testing::RandomValues(NumElements(shape.filter()), 2, -1, 1);
    const auto bias =
        testing::RandomValues(NumElements(shape.bias()), 3, -1, 1);
    const auto dy =
        testing::RandomValues(NumElements(shape.output()), 4, -1, 1);
    // The same host values through both backends (host memory either way).
    auto run = [&](Backend* be, Conv2dOp* op) {
      DeviceTensor tx = testing::Upload(be, x, shape.input());
      DeviceTensor tw = testing::Upload(be, w, shape.filter());
      DeviceTensor tb = testing::Upload(be, bias, shape.bias());
      DeviceTensor tdy = testing::Upload(be, dy, shape.output());
      DeviceTensor y = Zeros(be, shape.output()), dx = Zeros(be, shape.input());
      DeviceTensor dw = Zeros(be, shape.filter()), db = Zeros(be, shape.bias());
      REQUIRE_OK(op->Forward(tx.view(), tw.view(), tb.view(), y.view()));
      REQUIRE_OK(op->BackwardData(tdy.view(), tw.view(), dx.view()));
      REQUIRE_OK(
          op->BackwardFilter(tx.view(), tdy.view(), dw.view(), db.view()));
      return std::vector<std::vector<float>>{testing::Download(be, y.view()),
                                             testing::Download(be, dx.view()),
                                             testing::Download(be, dw.view())};
    };
    const auto want = run(f32.get(), a.get());
    const auto got = run(bf, b.get());
    for (size_t k = 0; k < want.size(); ++k) {
      INFO("result " << k);
      const auto e =
          testing::MaxRelativeDifference(got[k], testing::ToDouble(want[k]));
      CHECK(e < 2e-2);
      // Not float32 itself: the rounding is there.
      CHECK_FALSE(e < 1e-6);
    }
  }
}

// Conv2dShape::relu (the inference fold's convolution + ReLU): the forward
// is max(y, 0) of the same convolution without it, with and without a
// bias, strided, in NCHW and in channel blocks, on every CPU kernel; the
// backward calls are the convolution's alone.
TEST_CASE("conv2d with a fused ReLU is max(conv2d, 0)") {
  Conv2dShape strided = Conv(2, 16, 8, 8, 32, 3, 3);
  strided.stride = 2;
  strided.padding = 1;
  strided.has_bias = false;
  Conv2dShape blocked = strided;
  blocked.has_bias = true;
  blocked.in_block = blocked.out_block = 16;
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = testing::MakeBackend(name);
    std::vector<Conv2dShape> shapes = {Conv(2, 3, 6, 6, 5, 3, 3)};
    if (name == "cpu") {
      shapes.push_back(strided);
      if (backend->ChannelBlock() == 16) shapes.push_back(blocked);
    }
    for (Conv2dShape s : shapes) {
      INFO(name << " " << s.ToString());
      auto plain = Unwrap(backend->CreateConv2d(s));
      s.relu = true;
      auto fused = Unwrap(backend->CreateConv2d(s));
      Backend* be = backend.get();
      DeviceTensor x = testing::Upload(
          be, testing::RandomValues(NumElements(s.input()), 1, -1, 1),
          s.input());
      DeviceTensor w = testing::Upload(
          be, testing::RandomValues(NumElements(s.filter()), 2, -1, 1),
          s.filter());
      DeviceTensor b = testing::Upload(
          be, testing::RandomValues(NumElements(s.bias()), 3, -1, 1), s.bias());
      DeviceTensor y = Zeros(be, s.output()), yr = Zeros(be, s.output());
      REQUIRE_OK(plain->Forward(x.view(), w.view(), b.view(), y.view()));
      REQUIRE_OK(fused->Forward(x.view(), w.view(), b.view(), yr.view()));
      const std::vector<float> want = testing::Download(be, y.view());
      const std::vector<float> got = testing::Download(be, yr.view());
      int64_t negative = 0, positive = 0;
      for (size_t k = 0; k < want.size(); ++k) {
        if (want[k] < 0) {
          ++negative;
          CHECK(got[k] == 0.0f);
        } else {
          ++positive;
          CHECK(std::abs(got[k] - want[k]) <= 1e-6f * (1.0f + want[k]));
        }
      }
      CHECK(negative > 0);
      CHECK(positive > 0);
      // The backward is the convolution's: the same as the plain op's.
      DeviceTensor dx = Zeros(be, s.input()), dxr = Zeros(be, s.input());
      REQUIRE_OK(plain->BackwardData(y.view(), w.view(), dx.view()));
      REQUIRE_OK(fused->BackwardData(y.view(), w.view(), dxr.view()));
      CHECK(testing::Download(be, dx.view()) ==
            testing::Download(be, dxr.view()));
    }
  }
}

TEST_CASE("conv2d refuses views of another shape and invalid plans") {
  auto backend = testing::MakeBackend("cpu");
  const Conv2dShape s = Conv(2, 3, 4, 4, 5, 3, 3);
  auto op = Unwrap(backend->CreateConv2d(s));
  DeviceTensor x = Zeros(backend.get(), s.input());
  DeviceTensor w = Zeros(backend.get(), s.filter());
  DeviceTensor b = Zeros(backend.get(), s.bias());
  DeviceTensor wrong = Zeros(backend.get(), {2, 5, 4, 3});
  absl::Status st = op->Forward(x.view(), w.view(), b.view(), wrong.view());
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(st.message().find("y: shape [2, 5, 4, 3]") != absl::string_view::npos);
  CHECK(backend->CreateConv2d(Conv(0, 3, 4, 4, 5, 3, 3)).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
