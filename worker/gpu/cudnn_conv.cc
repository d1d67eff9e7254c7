#include "worker/gpu/cudnn_conv.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/gpu/cudnn_util.h"
#include "worker/gpu/elementwise.h"

namespace psgd::gpu {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

const char* MathName(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH:
      return "fma";
  }
  return "?";
}

// The three directions, with the cuDNN functions each one needs.
struct ConvForward {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr const char* kName = "forward";
};
struct ConvBackwardData {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr const char* kName = "backward data";
};
struct ConvBackwardFilter {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr const char* kName = "backward filter";
};

// One chosen algorithm and the workspace it needs.
template <typename Direction>
struct Choice {
  typename Direction::Algo algo{};
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
  std::string note;  // for the plan log
};

// The descriptors and scratch data a search runs on.
struct SearchArgs {
  cudnnHandle_t handle;
  cudnnTensorDescriptor_t x_desc;
  cudnnFilterDescriptor_t w_desc;
  cudnnTensorDescriptor_t y_desc;
  void* x;  // scratch of the (padded) input's size
  void* w;
  void* y;
  void* workspace;
  size_t workspace_size;
};

absl::StatusOr<int> MaxCount(cudnnHandle_t h, ConvForward) {
  int n = 0;
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &n));
  return n;
}
absl::StatusOr<int> MaxCount(cudnnHandle_t h, ConvBackwardData) {
  int n = 0;
  CUDNN_RETURN_IF_ERROR(
      cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &n));
  return n;
}
absl::StatusOr<int> MaxCount(cudnnHandle_t h, ConvBackwardFilter) {
  int n = 0;
  CUDNN_RETURN_IF_ERROR(
      cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &n));
  return n;
}

// Fills `perf` with cuDNN's ranking (fastest or most promising first).
absl::Status Rank(const SearchArgs& a, cudnnConvolutionDescriptor_t conv,
                  bool find, std::vector<ConvForward::Perf>* perf, int* count) {
  const int n = static_cast<int>(perf->size());
  if (find) {
    CUDNN_RETURN_IF_ERROR(cudnnFindConvolutionForwardAlgorithmEx(
        a.handle, a.x_desc, a.x, a.w_desc, a.w, conv, a.y_desc, a.y, n, count,
        perf->data(), a.workspace, a.workspace_size));
  } else {
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(
        a.handle, a.x_desc, a.w_desc, conv, a.y_desc, n, count, perf->data()));
  }
  return absl::OkStatus();
}
absl::Status Rank(const SearchArgs& a, cudnnConvolutionDescriptor_t conv,
                  bool find, std::vector<ConvBackwardData::Perf>* perf,
                  int* count) {
  const int n = static_cast<int>(perf->size());
  if (find) {
    CUDNN_RETURN_IF_ERROR(cudnnFindConvolutionBackwardDataAlgorithmEx(
        a.handle, a.w_desc, a.w, a.y_desc, a.y, conv, a.x_desc, a.x, n, count,
        perf->data(), a.workspace, a.workspace_size));
  } else {
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        a.handle, a.w_desc, a.y_desc, conv, a.x_desc, n, count, perf->data()));
  }
  return absl::OkStatus();
}
absl::Status Rank(const SearchArgs& a, cudnnConvolutionDescriptor_t conv,
                  bool find, std::vector<ConvBackwardFilter::Perf>* perf,
                  int* count) {
  const int n = static_cast<int>(perf->size());
  if (find) {
    CUDNN_RETURN_IF_ERROR(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        a.handle, a.x_desc, a.x, a.y_desc, a.y, conv, a.w_desc, a.w, n, count,
        perf->data(), a.workspace, a.workspace_size));
  } else {
    CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        a.handle, a.x_desc, a.y_desc, conv, a.w_desc, n, count, perf->data()));
  }
  return absl::OkStatus();
}

// The exact workspace of `algo` under the descriptor's current math type.
absl::StatusOr<size_t> WorkspaceSize(const SearchArgs& a,
                                     cudnnConvolutionDescriptor_t conv,
                                     ConvForward::Algo algo) {
  size_t bytes = 0;
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardWorkspaceSize(
      a.handle, a.x_desc, a.w_desc, conv, a.y_desc, algo, &bytes));
  return bytes;
}
absl::StatusOr<size_t> WorkspaceSize(const SearchArgs& a,
                                     cudnnConvolutionDescriptor_t conv,
                                     ConvBackwardData::Algo algo) {
  size_t bytes = 0;
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataWorkspaceSize(
      a.handle, a.w_desc, a.y_desc, conv, a.x_desc, algo, &bytes));
  return bytes;
}
absl::StatusOr<size_t> WorkspaceSize(const SearchArgs& a,
                                     cudnnConvolutionDescriptor_t conv,
                                     ConvBackwardFilter::Algo algo) {
  size_t bytes = 0;
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterWorkspaceSize(
      a.handle, a.x_desc, a.y_desc, conv, a.w_desc, algo, &bytes));
  return bytes;
}

// Ranks the algorithms of one direction and takes the first that the
// options allow. Leaves the descriptor's math type set for it.
template <typename Direction>
absl::StatusOr<Choice<Direction>> ChooseAlgorithm(
    const SearchArgs& a, cudnnConvolutionDescriptor_t conv,
    const GpuBackendOptions& o) {
  ASSIGN_OR_RETURN(int max_count, MaxCount(a.handle, Direction()));
  std::vector<typename Direction::Perf> perf(std::max(max_count, 1));
  int count = 0;
  RETURN_IF_ERROR(
      Rank(a, conv, o.conv_algo == ConvAlgoSearch::kFind, &perf, &count));
  std::string rejected;
  for (int i = 0; i < count; ++i) {
    const typename Direction::Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    const bool tensor_op = p.mathType == CUDNN_TENSOR_OP_MATH ||
                           p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (!o.tf32 && tensor_op) {
      absl::StrAppend(&rejected, " ", static_cast<int>(p.algo), ":tf32");
      continue;
    }
    if (o.deterministic && p.determinism != CUDNN_DETERMINISTIC) {
      absl::StrAppend(&rejected, " ", static_cast<int>(p.algo),
                      ":nondeterministic");
      continue;
    }
    // Without TF32 the descriptor stays at FMA math whatever cuDNN reports.
    const cudnnMathType_t math = o.tf32 ? p.mathType : CUDNN_FMA_MATH;
    CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv, math));
    const absl::StatusOr<size_t> queried = WorkspaceSize(a, conv, p.algo);
    if (!queried.ok()) {  // e.g. not supported with this math type
      absl::StrAppend(&rejected, " ", static_cast<int>(p.algo), ":",
                      queried.status().message());
      continue;
    }
    const size_t workspace = *queried;
    if (static_cast<int64_t>(workspace) > o.workspace_limit_bytes) {
      absl::StrAppend(&rejected, " ", static_cast<int>(p.algo), ":workspace");
      continue;
    }
    Choice<Direction> choice;
    choice.algo = p.algo;
    choice.math = math;
    choice.workspace = workspace;
    choice.note = absl::StrFormat("%s algo %d (%s math, %d B workspace%s)",
                                  Direction::kName, static_cast<int>(p.algo),
                                  MathName(math), workspace,
                                  o.conv_algo == ConvAlgoSearch::kFind
                                      ? absl::StrFormat(", %.3f ms", p.time)
                                      : std::string(", heuristic"));
    return choice;
  }
  return absl::InternalError(absl::StrCat(
      "cuDNN offers no ", Direction::kName, " algorithm within the options (",
      count, " ranked; tf32=", o.tf32 ? "on" : "off",
      ", deterministic=", o.deterministic ? "on" : "off", ", workspace_mb=",
      o.workspace_limit_bytes >> 20, "; rejected:", rejected, ")"));
}

class CudnnConv2d : public Conv2dOp {
 public:
  CudnnConv2d(const Conv2dShape& shape, GpuContext* context)
      : shape_(shape), name_(shape.ToString()), ctx_(context) {}

  const Conv2dShape& shape() const override { return shape_; }

  // Builds descriptors, chooses algorithms, allocates plan buffers.
  absl::Status Init();

 private:
  absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                         ConstDeviceView b, DeviceView y) override {
    return WithPrefix(RunForward(x.data(), w.data(), b.data(), y.data()),
                      name_ + " forward: ");
  }

  absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                              DeviceView dx) override {
    return WithPrefix(RunBackwardData(dy.data(), w.data(), dx.data()),
                      name_ + " backward data: ");
  }

  absl::Status DoBackwardFilter(ConstDeviceView x, ConstDeviceView dy,
                                DeviceView dw, DeviceView db) override {
    return WithPrefix(
        RunBackwardFilter(x.data(), dy.data(), dw.data(), db.data()),
        name_ + " backward filter: ");
  }

  // x: (N, C, H, W) -> the input cuDNN sees: x itself, or x zero-padded
  // into padded_x_.
  absl::StatusOr<const float*> Input(const float* x) {
    if (!explicit_pad_) return x;
    RETURN_IF_ERROR(LaunchPad2d(shape_.batch * shape_.in_channels,
                                shape_.height, shape_.width, pad_h_.before,
                                pad_h_.after, pad_w_.before, pad_w_.after, x,
                                padded_x_.as<float>(), ctx_->stream()));
    return static_cast<const float*>(padded_x_.as<float>());
  }

  absl::Status RunForward(const float* x, const float* w, const float* b,
                          float* y) {
    RETURN_IF_ERROR(ctx_->Activate());
    ASSIGN_OR_RETURN(const float* input, Input(x));
    ASSIGN_OR_RETURN(void* ws, ctx_->Workspace(fwd_.workspace));
    CUDNN_RETURN_IF_ERROR(
        cudnnConvolutionForward(ctx_->cudnn(), &kOne, x_desc_.get(), input,
                                w_desc_.get(), w, fwd_conv_.get(), fwd_.algo,
                                ws, fwd_.workspace, &kZero, y_desc_.get(), y));
    if (!shape_.has_bias && !shape_.relu) return absl::OkStatus();
    return LaunchBiasAdd(shape_.batch, shape_.out_channels, out_plane_,
                         shape_.has_bias ? b : nullptr, y, ctx_->stream(),
                         shape_.relu);
  }

  absl::Status RunBackwardData(const float* dy, const float* w, float* dx) {
    RETURN_IF_ERROR(ctx_->Activate());
    ASSIGN_OR_RETURN(void* ws, ctx_->Workspace(bwd_data_.workspace));
    float* out = explicit_pad_ ? padded_dx_.as<float>() : dx;
    CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(
        ctx_->cudnn(), &kOne, w_desc_.get(), w, y_desc_.get(), dy,
        bwd_data_conv_.get(), bwd_data_.algo, ws, bwd_data_.workspace, &kZero,
        x_desc_.get(), out));
    if (!explicit_pad_) return absl::OkStatus();
    return LaunchCrop2d(shape_.batch * shape_.in_channels, shape_.height,
                        shape_.width, padded_h_, padded_w_, pad_h_.before,
                        pad_w_.before, out, dx, ctx_->stream());
  }

  absl::Status RunBackwardFilter(const float* x, const float* dy, float* dw,
                                 float* db) {
    RETURN_IF_ERROR(ctx_->Activate());
    ASSIGN_OR_RETURN(const float* input, Input(x));
    ASSIGN_OR_RETURN(void* ws, ctx_->Workspace(bwd_filter_.workspace));
    CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(
        ctx_->cudnn(), &kOne, x_desc_.get(), input, y_desc_.get(), dy,
        bwd_filter_conv_.get(), bwd_filter_.algo, ws, bwd_filter_.workspace,
        &kZero, w_desc_.get(), dw));
    if (!shape_.has_bias) return absl::OkStatus();
    return LaunchBiasGrad(shape_.batch, shape_.out_channels, out_plane_, dy, db,
                          bias_scratch_.as<double>(), ctx_->stream());
  }

  const Conv2dShape shape_;
  const std::string name_;
  GpuContext* const ctx_;  // Not owned.

  // The shape's padding (SAME or symmetric) and output size; explicit_pad_
  // when the padding is not symmetric.
  SamePadding pad_h_, pad_w_;
  int64_t out_plane_ = 0;  // OH * OW
  bool explicit_pad_ = false;
  int64_t padded_h_ = 0, padded_w_ = 0;  // the input cuDNN sees

  TensorDescriptor x_desc_;  // (N, C, padded_h_, padded_w_)
  TensorDescriptor y_desc_;  // (N, O, OH, OW)
  FilterDescriptor w_desc_;  // (O, C, KH, KW)
  // One per direction: each carries the math type of its algorithm.
  ConvolutionDescriptor fwd_conv_, bwd_data_conv_, bwd_filter_conv_;
  Choice<ConvForward> fwd_;
  Choice<ConvBackwardData> bwd_data_;
  Choice<ConvBackwardFilter> bwd_filter_;

  DeviceBuffer padded_x_, padded_dx_;  // explicit padding only
  DeviceBuffer bias_scratch_;          // LaunchBiasGrad's float64 partials
};

absl::Status CudnnConv2d::Init() {
  const Conv2dShape& s = shape_;
  RETURN_IF_ERROR(ctx_->Activate());
  pad_h_ = s.pad_h();
  pad_w_ = s.pad_w();
  out_plane_ = pad_h_.output * pad_w_.output;
  explicit_pad_ =
      pad_h_.before != pad_h_.after || pad_w_.before != pad_w_.after;
  padded_h_ =
      explicit_pad_ ? s.height + pad_h_.before + pad_h_.after : s.height;
  padded_w_ = explicit_pad_ ? s.width + pad_w_.before + pad_w_.after : s.width;
  const int64_t conv_pad_h = explicit_pad_ ? 0 : pad_h_.before;
  const int64_t conv_pad_w = explicit_pad_ ? 0 : pad_w_.before;

  ASSIGN_OR_RETURN(x_desc_, CreateTensorDescriptor(s.batch, s.in_channels,
                                                   padded_h_, padded_w_));
  ASSIGN_OR_RETURN(
      y_desc_, CreateTensorDescriptor(s.batch, s.out_channels, pad_h_.output,
                                      pad_w_.output));
  ASSIGN_OR_RETURN(
      w_desc_, CreateFilterDescriptor(s.out_channels, s.in_channels, s.kernel_h,
                                      s.kernel_w));
  const cudnnMathType_t search_math =
      ctx_->options().tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  for (ConvolutionDescriptor* conv :
       {&fwd_conv_, &bwd_data_conv_, &bwd_filter_conv_}) {
    ASSIGN_OR_RETURN(*conv, CreateConvolutionDescriptor(conv_pad_h, conv_pad_w,
                                                        s.stride, search_math));
  }
  // The geometry cuDNN derives must be ours.
  int dims[4] = {0, 0, 0, 0};
  CUDNN_RETURN_IF_ERROR(cudnnGetConvolution2dForwardOutputDim(
      fwd_conv_.get(), x_desc_.get(), w_desc_.get(), &dims[0], &dims[1],
      &dims[2], &dims[3]));
  const Shape got = {dims[0], dims[1], dims[2], dims[3]};
  if (got != s.output()) {
    return absl::InternalError(absl::StrCat("cuDNN computes output ",
                                            ShapeToString(got), ", expected ",
                                            ShapeToString(s.output())));
  }

  cudaStream_t stream = ctx_->stream();
  const size_t x_bytes =
      sizeof(float) * s.batch * s.in_channels * padded_h_ * padded_w_;
  if (explicit_pad_) {
    ASSIGN_OR_RETURN(padded_x_, DeviceBuffer::Allocate(x_bytes, stream));
    ASSIGN_OR_RETURN(padded_dx_, DeviceBuffer::Allocate(x_bytes, stream));
  }
  if (s.has_bias) {
    ASSIGN_OR_RETURN(
        bias_scratch_,
        DeviceBuffer::Allocate(
            sizeof(double) * BiasGradScratchElements(s.batch, s.out_channels),
            stream));
  }

  // Zeroed scratch data of the plan's shape for the timing runs, and as
  // much search workspace as the limit allows and the device has.
  {
    ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(x_bytes, stream));
    ASSIGN_OR_RETURN(DeviceBuffer w,
                     DeviceBuffer::Allocate(
                         sizeof(float) * NumElements(s.filter()), stream));
    ASSIGN_OR_RETURN(DeviceBuffer y,
                     DeviceBuffer::Allocate(
                         sizeof(float) * NumElements(s.output()), stream));
    for (const DeviceBuffer* b : {&x, &w, &y}) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b->data(), 0, b->size(), stream));
    }
    DeviceBuffer search_ws;
    if (ctx_->options().conv_algo == ConvAlgoSearch::kFind) {
      for (size_t bytes = ctx_->options().workspace_limit_bytes; bytes > 0;
           bytes /= 2) {
        absl::StatusOr<DeviceBuffer> ws = DeviceBuffer::Allocate(bytes, stream);
        if (ws.ok()) {
          search_ws = std::move(ws).value();
          break;
        }
        if (ws.status().code() != absl::StatusCode::kResourceExhausted) {
          return ws.status();
        }
      }
    }
    const SearchArgs args{ctx_->cudnn(), x_desc_.get(),    w_desc_.get(),
                          y_desc_.get(), x.data(),         w.data(),
                          y.data(),      search_ws.data(), search_ws.size()};
    const GpuBackendOptions& o = ctx_->options();
    ASSIGN_OR_RETURN(fwd_,
                     ChooseAlgorithm<ConvForward>(args, fwd_conv_.get(), o));
    ASSIGN_OR_RETURN(bwd_data_, ChooseAlgorithm<ConvBackwardData>(
                                    args, bwd_data_conv_.get(), o));
    ASSIGN_OR_RETURN(bwd_filter_, ChooseAlgorithm<ConvBackwardFilter>(
                                      args, bwd_filter_conv_.get(), o));
  }  // the search buffers are freed here
  ctx_->NotePlan(
      absl::StrCat(name_, (explicit_pad_ ? " (explicit padding)" : ""), ": ",
                   fwd_.note, "; ", bwd_data_.note, "; ", bwd_filter_.note));
  // Grow the shared workspace now, so that runs never allocate.
  return ctx_
      ->Workspace(std::max(
          {fwd_.workspace, bwd_data_.workspace, bwd_filter_.workspace}))
      .status();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateCudnnConv2d(
    const Conv2dShape& shape, GpuContext* context) {
  RETURN_IF_ERROR(shape.Validate());
  auto op = std::make_unique<CudnnConv2d>(shape, context);
  RETURN_IF_ERROR(WithPrefix(op->Init(), shape.ToString() + ": "));
  return std::unique_ptr<Conv2dOp>(std::move(op));
}

}  // namespace psgd::gpu
