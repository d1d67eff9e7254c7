// The CPU backend as a whole: creation by name, options, memory and copies;
// on every kernel choice, every op's and element-wise call refuses an output
// of another shape through its entry (backend.h) and leaves it untouched.
// The ops have their own tests (conv2d_test, pooling_test, ...).
#include "worker/cpu/cpu_backend.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "worker/backend_factory/factory.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Unwrap;

TEST_CASE("backends are created by name; bad names are refused clearly") {
  BackendOptions options;
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = Unwrap(CreateBackend(name, options));
    CHECK(backend->name() == "cpu");
  }
  absl::Status s = CreateBackend("tpu", options).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("unknown backend 'tpu'") != absl::string_view::npos);
  s = CreateBackend("cpu:conv=fft", options).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("'conv=fft'") != absl::string_view::npos);
  CHECK(CreateBackend("cpu:", options).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // gpu:K works only with CUDA and a GPU (worker/gpu has its tests).
  absl::StatusOr<std::unique_ptr<Backend>> gpu =
      CreateBackend("gpu:0", options);
  CHECK((gpu.ok() ||
         gpu.status().code() == absl::StatusCode::kFailedPrecondition));
  CHECK(CreateBackend("gpu:x", options).status().code() ==
        absl::StatusCode::kInvalidArgument);
  options.threads = -1;
  CHECK(CreateBackend("cpu", options).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cpu backend names parse into options") {
  CpuBackendOptions o = Unwrap(ParseCpuBackendName("cpu", 3));
  CHECK(o.threads == 3);
  CHECK(o.conv == ConvAlgorithm::kAuto);
  CHECK(o.gemm == GemmLibrary::kOneDnn);
  CHECK(Unwrap(ParseCpuBackendName("cpu:conv=onednn", 1)).conv ==
        ConvAlgorithm::kOneDnn);
  CHECK(Unwrap(ParseCpuBackendName("cpu:conv=winograd", 1)).conv ==
        ConvAlgorithm::kWinograd);
  CHECK(RunsWinograd(Unwrap(ParseCpuBackendName("cpu", 1))) ==
        (__builtin_cpu_supports("avx512f") ||
         (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))));
  // In bfloat16 compute conv=auto still weighs Winograd (float32) against
  // the direct kernel; conv=onednn puts every convolution in bfloat16.
  CHECK(RunsWinograd(Unwrap(ParseCpuBackendName("cpu:compute=bf16", 1))) ==
        RunsWinograd(Unwrap(ParseCpuBackendName("cpu", 1))));
  for (const char* name : {"cpu:conv=onednn", "cpu:compute=bf16,conv=onednn",
                           "cpu:layout=plain", "cpu:conv=im2col"}) {
    INFO(name);
    CHECK_FALSE(RunsWinograd(Unwrap(ParseCpuBackendName(name, 1))));
  }
  CHECK(o.pool == ThreadPool::Runtime::kOpenMp);
  o = Unwrap(
      ParseCpuBackendName("cpu:gemm=openblas,conv=im2col,pool=threads", 1));
  CHECK(o.conv == ConvAlgorithm::kIm2col);
  CHECK(o.gemm == GemmLibrary::kOpenBlas);
  CHECK(o.pool == ThreadPool::Runtime::kOwnThreads);
}

TEST_CASE("memory is zeroed, aligned, and copies round-trip") {
  auto backend = testing::MakeBackend("cpu");
  DeviceTensor t = Unwrap(backend->Allocate({3, 5}));
  CHECK(t.size() == 15);
  CHECK(reinterpret_cast<uintptr_t>(t.view().data()) % 64 == 0);
  CHECK(testing::Download(backend.get(), t.view()) ==
        std::vector<float>(15, 0.0f));
  std::vector<float> values(15);
  for (int i = 0; i < 15; ++i) values[i] = i * 0.5f;
  REQUIRE_OK(
      backend->CopyToDevice(ConstTensorView(values.data(), {15}), t.view()));
  REQUIRE_OK(backend->Synchronize());
  CHECK(testing::Download(backend.get(), t.view()) == values);
  // A view may be reshaped; element counts must agree for copies.
  CHECK(t.view().Reshaped({15}).size() == 15);
  std::vector<float> small(4);
  CHECK(backend->CopyToHost(t.view(), TensorView(small.data(), {4})).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(backend->CopyToDevice(ConstTensorView(small.data(), {4}), t.view())
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(backend->Allocate({2, 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // Moving keeps ownership single.
  DeviceTensor moved = std::move(t);
  CHECK(moved.size() == 15);
}

// A backend tensor of `shape` with one more row (its first dimension + 1),
// every element 7.
DeviceTensor Sevens(Backend* backend, Shape shape) {
  ++shape[0];
  return testing::Upload(backend, std::vector<float>(NumElements(shape), 7.0f),
                         shape);
}

bool AllSevens(Backend* backend, const DeviceTensor& t) {
  const std::vector<float> v = testing::Download(backend, t.view());
  return std::all_of(v.begin(), v.end(), [](float e) { return e == 7.0f; });
}

// `st` is INVALID_ARGUMENT with `text` in its message, and `out` (the
// call's output, of the wrong shape) is as it was.
void CheckRefused(Backend* backend, const absl::Status& st,
                  const std::string& text, const DeviceTensor& out) {
  INFO(text << ": " << st.ToString());
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(st.message().find(text) != absl::string_view::npos);
  CHECK(AllSevens(backend, out));
}

TEST_CASE("every call refuses an output of another shape on every kernel") {
  std::vector<std::string> names = testing::CpuBackendNames();
  for (const char* more : {"cpu:conv=onednn", "cpu:layout=plain"}) {
    names.push_back(more);
  }
  for (const std::string& name : names) {
    INFO(name);
    auto be = testing::MakeBackend(name);
    Backend* b = be.get();
    const int64_t block = b->ChannelBlock();
    // A convolution every kernel runs (stride 1, SAME, a bias).
    Conv2dShape cs{2, 16, 6, 6, 16, 3, 3};
    cs.in_block = cs.out_block = block;
    auto conv = Unwrap(b->CreateConv2d(cs));
    const Shape a = cs.input(), w = cs.filter(), bias = cs.bias();
    DeviceTensor x = testing::Zeros(b, a), dy = testing::Zeros(b, a);
    DeviceTensor wt = testing::Zeros(b, w), bt = testing::Zeros(b, bias);
    DeviceTensor out = Sevens(b, a);
    CheckRefused(b, conv->Forward(x.view(), wt.view(), bt.view(), out.view()),
                 "y: shape " + ShapeToString(out.shape()), out);
    CheckRefused(b, conv->BackwardData(dy.view(), wt.view(), out.view()),
                 "dx: shape", out);
    DeviceTensor dw = Sevens(b, w);
    CheckRefused(
        b, conv->BackwardFilter(x.view(), dy.view(), dw.view(), bt.view()),
        "dw: shape", dw);

    auto pool = Unwrap(b->CreateMaxPool({2, 16, 6, 6, 3, 2, block}));
    const Shape po = pool->shape().output();
    DeviceTensor py = testing::Zeros(b, po), pout = Sevens(b, po);
    CheckRefused(b, pool->Forward(x.view(), pout.view()), "y: shape", pout);
    CheckRefused(b, pool->Backward(x.view(), py.view(), py.view(), out.view()),
                 "dx: shape", out);

    auto lrn = Unwrap(b->CreateLrn({2, 16, 6, 6, LrnParams()}));
    CheckRefused(b, lrn->Forward(x.view(), out.view()), "y: shape", out);
    CheckRefused(b, lrn->Backward(x.view(), x.view(), dy.view(), out.view()),
                 "dx: shape", out);

    BatchNormShape bs;
    bs.batch = 2;
    bs.channels = 16;
    bs.height = bs.width = 6;
    bs.relu = true;
    bs.channel_block = block;
    auto bn = Unwrap(b->CreateBatchNorm(bs));
    DeviceTensor c1 = testing::Zeros(b, {16}), c2 = testing::Zeros(b, {16});
    DeviceTensor c3 = testing::Zeros(b, {16}), c4 = testing::Zeros(b, {16});
    CheckRefused(
        b,
        bn->ForwardTraining(x.view(), c1.view(), c2.view(), out.view(),
                            c3.view(), c4.view(), c1.view(), c2.view()),
        "y: shape", out);
    CheckRefused(b,
                 bn->ForwardInference(x.view(), c1.view(), c2.view(), c3.view(),
                                      c4.view(), out.view()),
                 "y: shape", out);
    CheckRefused(
        b,
        bn->Backward(x.view(), x.view(), dy.view(), c1.view(), c3.view(),
                     c4.view(), out.view(), c1.view(), c2.view()),
        "dx: shape", out);

    auto dense = Unwrap(b->CreateDense({2, 8, 4}));
    const DenseShape& ds = dense->shape();
    DeviceTensor dx = testing::Zeros(b, ds.input()),
                 dwt = testing::Zeros(b, ds.weights()),
                 db = testing::Zeros(b, ds.bias()),
                 ddy = testing::Zeros(b, ds.output());
    DeviceTensor dout = Sevens(b, ds.output()), din = Sevens(b, ds.input());
    DeviceTensor dww = Sevens(b, ds.weights());
    CheckRefused(b,
                 dense->Forward(dx.view(), dwt.view(), db.view(), dout.view()),
                 "y: shape", dout);
    CheckRefused(b, dense->BackwardData(ddy.view(), dwt.view(), din.view()),
                 "dx: shape", din);
    CheckRefused(
        b, dense->BackwardWeights(dx.view(), ddy.view(), dww.view(), db.view()),
        "dw: shape", dww);

    auto xent = Unwrap(b->CreateSoftmaxCrossEntropy({2, 5}));
    DeviceTensor logits = testing::Zeros(b, {2, 5});
    DeviceTensor dlogits = Sevens(b, {2, 5});
    CheckRefused(b, xent->Run(logits.view(), {1, 4}, dlogits.view()).status(),
                 "dlogits: shape", dlogits);
    DeviceTensor dl = Sevens(b, {1, 5});  // the right shape, (2, 5)
    CheckRefused(b, xent->Run(logits.view(), {1, 5}, dl.view()).status(),
                 "label 5 of example 1 is outside [0, 5)", dl);
    CheckRefused(b, xent->Run(logits.view(), {1}, dl.view()).status(),
                 "1 labels for a batch of 2", dl);

    CheckRefused(b, b->Add(x.view(), x.view(), out.view()), "add: shapes", out);
    CheckRefused(b, b->AddRelu(x.view(), x.view(), out.view()),
                 "add relu: shapes", out);
    CheckRefused(b, b->ReluForward(x.view(), out.view()), "relu: shapes", out);
    CheckRefused(b, b->ReluBackward(x.view(), dy.view(), out.view()),
                 "relu backward: shapes", out);
    CheckRefused(b, b->Copy(x.view(), out.view()), "copy: ", out);
    DeviceTensor gout = Sevens(b, {2, 16});
    CheckRefused(b, b->GlobalAvgPoolForward(x.view(), block, gout.view()),
                 "global average pooling: ", gout);
    DeviceTensor gdy = testing::Zeros(b, {2, 16});
    CheckRefused(b, b->GlobalAvgPoolBackward(gdy.view(), block, out.view()),
                 "global average pooling: ", out);
    CheckRefused(b, b->L2WeightDecay(wt.view(), 0.1f, dw.view()).status(),
                 "l2 weight decay: shapes", dw);
    const std::vector<float> host(NumElements(a), 1.0f);
    CheckRefused(b,
                 b->CopyToDevice(ConstTensorView(host.data(), a), out.view()),
                 "CopyToDevice: ", out);
  }
}

}  // namespace
}  // namespace psgd
