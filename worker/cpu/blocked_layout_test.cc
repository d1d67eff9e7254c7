// The channel-blocked activation layout (op_shapes.h, ValidateChannelBlock)
// on every CPU op that takes it: each op given its tensors in blocks of 8 or
// 16 channels gives what the same op gives in NCHW on the same values (the
// NCHW ops are checked against the float64 reference in their own tests),
// within float rounding for the convolutions and batch norm and exactly for
// the pools. Also the refusals: blocks that do not divide the channels, the
// im2col convolution, and the backend's layout option.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/backend/backend.h"
#include "worker/backend/op_shapes.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cpu/onednn_util.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Download;
using testing::FromBlocks;
using testing::MakeBackend;
using testing::ToBlocks;
using testing::Unwrap;
using testing::Upload;

// `values` of an activation of `shape` uploaded in the layout of `block`.
DeviceTensor UploadIn(Backend* b, const std::vector<float>& values,
                      const Shape& shape, int64_t block) {
  return Upload(b, block == 0 ? values : ToBlocks(values, shape, block), shape);
}

// An activation downloaded from the layout of `block` into NCHW.
std::vector<float> DownloadFrom(Backend* b, const DeviceTensor& t,
                                int64_t block) {
  std::vector<float> v = Download(b, t.view());
  return block == 0 ? v : FromBlocks(v, t.shape(), block);
}

void CheckClose(const std::vector<float>& got, const std::vector<float>& want,
                double tolerance) {
  CHECK(testing::MaxRelativeDifference(got, testing::ToDouble(want)) <
        tolerance);
}

// The convolution `s` with x and dx in blocks of `in_block`, y and dy in
// blocks of `out_block`: forward and both backward passes as in NCHW.
void CheckBlockedConv(Backend* b, const Conv2dShape& s, int64_t in_block,
                      int64_t out_block) {
  Conv2dShape blocked = s;
  blocked.in_block = in_block;
  blocked.out_block = out_block;
  INFO(blocked.ToString());
  auto plain_op = Unwrap(b->CreateConv2d(s));
  auto op = Unwrap(b->CreateConv2d(blocked));
  const auto x = testing::RandomValues(NumElements(s.input()), 1, -1, 1);
  const auto w = testing::RandomValues(NumElements(s.filter()), 2, -1, 1);
  const auto bias = testing::RandomValues(NumElements(s.bias()), 3, -1, 1);
  const auto dy = testing::RandomValues(NumElements(s.output()), 4, -1, 1);
  DeviceTensor tw = Upload(b, w, s.filter());
  DeviceTensor tb = Upload(b, bias, s.bias());
  DeviceTensor px = UploadIn(b, x, s.input(), 0);
  DeviceTensor bx = UploadIn(b, x, s.input(), in_block);
  DeviceTensor pdy = UploadIn(b, dy, s.output(), 0);
  DeviceTensor bdy = UploadIn(b, dy, s.output(), out_block);
  DeviceTensor py = testing::Zeros(b, s.output());
  DeviceTensor by = testing::Zeros(b, s.output());
  REQUIRE_OK(plain_op->Forward(px.view(), tw.view(), tb.view(), py.view()));
  REQUIRE_OK(op->Forward(bx.view(), tw.view(), tb.view(), by.view()));
  CheckClose(DownloadFrom(b, by, out_block), Download(b, py.view()), 1e-5);

  DeviceTensor pdx = testing::Zeros(b, s.input());
  DeviceTensor bdx = testing::Zeros(b, s.input());
  REQUIRE_OK(plain_op->BackwardData(pdy.view(), tw.view(), pdx.view()));
  REQUIRE_OK(op->BackwardData(bdy.view(), tw.view(), bdx.view()));
  CheckClose(DownloadFrom(b, bdx, in_block), Download(b, pdx.view()), 1e-5);

  DeviceTensor pdw = testing::Zeros(b, s.filter());
  DeviceTensor bdw = testing::Zeros(b, s.filter());
  DeviceTensor pdb = testing::Zeros(b, s.bias());
  DeviceTensor bdb = testing::Zeros(b, s.bias());
  REQUIRE_OK(
      plain_op->BackwardFilter(px.view(), pdy.view(), pdw.view(), pdb.view()));
  REQUIRE_OK(op->BackwardFilter(bx.view(), bdy.view(), bdw.view(), bdb.view()));
  CheckClose(Download(b, bdw.view()), Download(b, pdw.view()), 1e-5);
  if (s.has_bias) {
    CheckClose(Download(b, bdb.view()), Download(b, pdb.view()), 1e-5);
  }
}

TEST_CASE("the layouts' definition round-trips") {
  const Shape s = {2, 32, 3, 5};
  const std::vector<float> v = testing::RandomValues(NumElements(s), 1, -1, 1);
  CHECK(FromBlocks(ToBlocks(v, s, 16), s, 16) == v);
  // Channel 17 of image 1 at (0, 0): block 1, lane 1.
  CHECK(ToBlocks(v, s, 16)[((1 * 2 + 1) * 15 + 0) * 16 + 1] ==
        v[(1 * 32 + 17) * 15]);
}

TEST_CASE("convolutions in channel blocks match NCHW") {
  auto backend = MakeBackend("cpu");
  Backend* b = backend.get();
  struct Case {
    Conv2dShape shape;
    int64_t in_block, out_block;
  };
  Conv2dShape first{2, 3, 6, 6, 16, 3, 3};  // the images in, SAME, a bias
  Conv2dShape same{2, 16, 6, 6, 32, 3, 3};
  same.padding = 1;
  same.has_bias = false;
  Conv2dShape strided{2, 16, 7, 7, 16, 3, 3};
  strided.stride = 2;
  strided.padding = 1;
  strided.has_bias = false;
  Conv2dShape shortcut{2, 16, 8, 8, 32, 1, 1};
  shortcut.stride = 2;
  shortcut.padding = 0;
  shortcut.has_bias = false;
  const std::vector<Case> cases = {
      {first, 0, 16},    {first, 0, 8},      {same, 16, 16}, {same, 8, 8},
      {same, 16, 0},     {same, 0, 16},      {same, 16, 8},  {strided, 16, 16},
      {shortcut, 8, 16}, {shortcut, 16, 16},
  };
  for (const Case& c : cases)
    CheckBlockedConv(b, c.shape, c.in_block, c.out_block);
}

TEST_CASE("24- and 12-channel convolutions at every block size") {
  // A block that does not divide the channels is refused by name; the
  // largest that does (LargestChannelBlock: 8 for 24 at 16, NCHW for 12)
  // computes as NCHW, on each kernel, whatever block this CPU prefers.
  for (const char* spec : {"cpu", "cpu:conv=winograd", "cpu:conv=onednn"}) {
    auto backend = MakeBackend(spec);
    Backend* b = backend.get();
    for (int64_t channels : {24, 12}) {
      Conv2dShape s{2, channels, 6, 6, channels, 3, 3};
      s.padding = 1;
      for (int64_t block : {0, 8, 16}) {
        INFO(spec << ", " << channels << " channels at block " << block);
        const int64_t fit = LargestChannelBlock(channels, block);
        CHECK(fit == (block == 0 || channels == 12 ? 0 : 8));
        CheckBlockedConv(b, s, fit, fit);
        if (fit != block) {
          Conv2dShape refused = s;
          refused.in_block = refused.out_block = block;
          const absl::Status st = b->CreateConv2d(refused).status();
          CHECK(st.code() == absl::StatusCode::kInvalidArgument);
          CHECK(st.message().find(absl::StrCat(
                    "a channel block of ", block, " for ", channels,
                    " channels")) != absl::string_view::npos);
        }
      }
    }
  }
}

TEST_CASE("batch norm in channel blocks matches NCHW") {
  auto backend = MakeBackend("cpu");
  Backend* b = backend.get();
  for (int64_t block : {8, 16}) {
    for (bool relu : {false, true}) {
      BatchNormShape s{3, 32, 5, 4};
      s.relu = relu;
      BatchNormShape blocked = s;
      blocked.channel_block = block;
      INFO(blocked.ToString());
      auto plain_op = Unwrap(b->CreateBatchNorm(s));
      auto op = Unwrap(b->CreateBatchNorm(blocked));
      const Shape in = s.input(), c = s.params();
      const auto x = testing::RandomValues(NumElements(in), 5, -2, 3);
      const auto dy = testing::RandomValues(NumElements(in), 6, -1, 1);
      const auto gamma = testing::RandomValues(32, 7, 0.5, 1.5);
      const auto beta = testing::RandomValues(32, 8, -0.5, 0.5);
      DeviceTensor tg = Upload(b, gamma, c), tbeta = Upload(b, beta, c);
      struct Run {
        DeviceTensor x, y, dy, dx, mean, var, running_mean, running_var, dgamma,
            dbeta;
      };
      auto run = [&](BatchNormOp* o, int64_t blk) {
        Run r{UploadIn(b, x, in, blk),
              testing::Zeros(b, in),
              UploadIn(b, dy, in, blk),
              testing::Zeros(b, in),
              testing::Zeros(b, c),
              testing::Zeros(b, c),
              testing::Zeros(b, c),
              Upload(b, std::vector<float>(32, 1.0f), c),
              testing::Zeros(b, c),
              testing::Zeros(b, c)};
        REQUIRE_OK(o->ForwardTraining(
            r.x.view(), tg.view(), tbeta.view(), r.y.view(), r.mean.view(),
            r.var.view(), r.running_mean.view(), r.running_var.view()));
        REQUIRE_OK(o->Backward(r.x.view(), r.y.view(), r.dy.view(), tg.view(),
                               r.mean.view(), r.var.view(), r.dx.view(),
                               r.dgamma.view(), r.dbeta.view()));
        return r;
      };
      const Run p = run(plain_op.get(), 0);
      const Run q = run(op.get(), block);
      CheckClose(DownloadFrom(b, q.y, block), Download(b, p.y.view()), 1e-5);
      CheckClose(DownloadFrom(b, q.dx, block), Download(b, p.dx.view()), 1e-4);
      for (auto [got, want] :
           {std::pair(&q.mean, &p.mean), std::pair(&q.var, &p.var),
            std::pair(&q.running_mean, &p.running_mean),
            std::pair(&q.running_var, &p.running_var),
            std::pair(&q.dgamma, &p.dgamma), std::pair(&q.dbeta, &p.dbeta)}) {
        CheckClose(Download(b, got->view()), Download(b, want->view()), 1e-5);
      }
      // Inference with the running statistics.
      DeviceTensor py = testing::Zeros(b, in), qy = testing::Zeros(b, in);
      REQUIRE_OK(plain_op->ForwardInference(p.x.view(), tg.view(), tbeta.view(),
                                            p.running_mean.view(),
                                            p.running_var.view(), py.view()));
      REQUIRE_OK(op->ForwardInference(q.x.view(), tg.view(), tbeta.view(),
                                      p.running_mean.view(),
                                      p.running_var.view(), qy.view()));
      CheckClose(DownloadFrom(b, qy, block), Download(b, py.view()), 1e-5);
    }
  }
}

TEST_CASE("pooling in channel blocks matches NCHW exactly") {
  auto backend = MakeBackend("cpu");
  Backend* b = backend.get();
  for (int64_t block : {8, 16}) {
    for (auto [window, stride] : {std::pair(3, 2), std::pair(2, 2)}) {
      PoolShape s{2, 32, 7, 6, window, stride};
      PoolShape blocked = s;
      blocked.channel_block = block;
      INFO(blocked.ToString());
      auto plain_op = Unwrap(b->CreateMaxPool(s));
      auto op = Unwrap(b->CreateMaxPool(blocked));
      // Small integers: windows with ties, where the first maximum (row
      // major) takes the gradient in both layouts.
      auto x = testing::RandomValues(NumElements(s.input()), 9, 0, 4);
      for (float& v : x) v = static_cast<float>(static_cast<int>(v));
      const auto dy = testing::RandomValues(NumElements(s.output()), 10, -1, 1);
      DeviceTensor px = UploadIn(b, x, s.input(), 0);
      DeviceTensor bx = UploadIn(b, x, s.input(), block);
      DeviceTensor py = testing::Zeros(b, s.output());
      DeviceTensor by = testing::Zeros(b, s.output());
      REQUIRE_OK(plain_op->Forward(px.view(), py.view()));
      REQUIRE_OK(op->Forward(bx.view(), by.view()));
      CHECK(DownloadFrom(b, by, block) == Download(b, py.view()));
      DeviceTensor pdy = UploadIn(b, dy, s.output(), 0);
      DeviceTensor bdy = UploadIn(b, dy, s.output(), block);
      DeviceTensor pdx = testing::Zeros(b, s.input());
      DeviceTensor bdx = testing::Zeros(b, s.input());
      REQUIRE_OK(
          plain_op->Backward(px.view(), py.view(), pdy.view(), pdx.view()));
      REQUIRE_OK(op->Backward(bx.view(), by.view(), bdy.view(), bdx.view()));
      CHECK(DownloadFrom(b, bdx, block) == Download(b, pdx.view()));
    }
  }
  // Global average pooling: the same sums in the same order.
  const Shape in = {3, 32, 5, 5};
  const auto x = testing::RandomValues(NumElements(in), 11, -1, 1);
  const auto dy = testing::RandomValues(3 * 32, 12, -1, 1);
  DeviceTensor px = UploadIn(b, x, in, 0), bx = UploadIn(b, x, in, 16);
  DeviceTensor py = testing::Zeros(b, {3, 32}), by = testing::Zeros(b, {3, 32});
  REQUIRE_OK(b->GlobalAvgPoolForward(px.view(), 0, py.view()));
  REQUIRE_OK(b->GlobalAvgPoolForward(bx.view(), 16, by.view()));
  CHECK(Download(b, by.view()) == Download(b, py.view()));
  DeviceTensor tdy = Upload(b, dy, {3, 32});
  DeviceTensor pdx = testing::Zeros(b, in), bdx = testing::Zeros(b, in);
  REQUIRE_OK(b->GlobalAvgPoolBackward(tdy.view(), 0, pdx.view()));
  REQUIRE_OK(b->GlobalAvgPoolBackward(tdy.view(), 16, bdx.view()));
  CHECK(DownloadFrom(b, bdx, 16) == Download(b, pdx.view()));
}

TEST_CASE("channel blocks are refused where they cannot be") {
  auto backend = MakeBackend("cpu");
  BatchNormShape bn{2, 24, 4, 4};
  bn.channel_block = 16;
  absl::Status st = backend->CreateBatchNorm(bn).status();
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(st.message().find("a channel block of 16 for 24 channels") !=
        absl::string_view::npos);
  PoolShape pool{2, 16, 4, 4, 3, 2};
  pool.channel_block = 4;
  CHECK(backend->CreateMaxPool(pool).status().code() ==
        absl::StatusCode::kInvalidArgument);
  Conv2dShape conv{2, 16, 4, 4, 16, 3, 3};
  conv.out_block = 32;
  CHECK(backend->CreateConv2d(conv).status().code() ==
        absl::StatusCode::kInvalidArgument);
  DeviceTensor x = testing::Zeros(backend.get(), {2, 24, 3, 3});
  DeviceTensor y = testing::Zeros(backend.get(), {2, 24});
  CHECK(backend->GlobalAvgPoolForward(x.view(), 16, y.view()).code() ==
        absl::StatusCode::kInvalidArgument);
  // The im2col convolution takes NCHW only.
  auto im2col = MakeBackend("cpu:conv=im2col");
  CHECK(im2col->ChannelBlock() == 0);
  conv.out_block = 16;
  st = im2col->CreateConv2d(conv).status();
  CHECK(st.code() == absl::StatusCode::kUnimplemented);
  CHECK(st.message().find("NCHW only") != absl::string_view::npos);
}

TEST_CASE("the backend's layout option") {
  CHECK(MakeBackend("cpu")->ChannelBlock() == OneDnnChannelBlock());
  CHECK(MakeBackend("cpu:layout=plain")->ChannelBlock() == 0);
  CHECK(MakeBackend("cpu:layout=blocked")->ChannelBlock() ==
        OneDnnChannelBlock());
  const int64_t block = OneDnnChannelBlock();
  CHECK((block == 0 || block == 8 || block == 16));
  // CI runs the engine's tests a second time as an AVX2 machine would
  // (.ci/run, ONEDNN_MAX_CPU_ISA=AVX2): the layout must follow the ISA
  // oneDNN was capped to, not the CPU's own.
  for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* cap = std::getenv(var);
    if (cap != nullptr && absl::EqualsIgnoreCase(cap, "AVX2") &&
        __builtin_cpu_supports("avx2")) {
      INFO(var << "=" << cap);
      CHECK(block == 8);
    }
  }
  auto bad = ParseCpuBackendName("cpu:layout=nhwc", 1);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("layout=plain") != absl::string_view::npos);
}

}  // namespace
}  // namespace psgd
