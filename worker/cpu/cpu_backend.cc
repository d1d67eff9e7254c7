#include "worker/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "worker/cpu/batch_norm_onednn.h"
#include "worker/cpu/conv_choice.h"
#include "worker/cpu/conv_im2col.h"
#include "worker/cpu/conv_onednn.h"
#include "worker/cpu/conv_winograd.h"
#include "worker/cpu/dense.h"
#include "worker/cpu/elementwise.h"
#include "worker/cpu/lrn.h"
#include "worker/cpu/lrn_onednn.h"
#include "worker/cpu/onednn_util.h"
#include "worker/cpu/pooling.h"
#include "worker/cpu/softmax_xent.h"

namespace psgd {
namespace {

class CpuMaxPool : public MaxPoolOp {
 public:
  CpuMaxPool(const PoolShape& shape, ThreadPool* pool)
      : shape_(shape), pool_(pool) {}
  const PoolShape& shape() const override { return shape_; }

 private:
  absl::Status DoForward(ConstDeviceView x, DeviceView y) override {
    MaxPoolForwardKernel(shape_, x.data(), y.data(), pool_);
    return absl::OkStatus();
  }

  absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                          ConstDeviceView dy, DeviceView dx) override {
    MaxPoolBackwardKernel(shape_, x.data(), dy.data(), dx.data(), pool_);
    return absl::OkStatus();
  }

  const PoolShape shape_;
  ThreadPool* const pool_;  // Not owned.
};

class CpuLrn : public LrnOp {
 public:
  CpuLrn(const LrnShape& shape, ThreadPool* pool)
      : shape_(shape), pool_(pool) {}
  const LrnShape& shape() const override { return shape_; }

 private:
  absl::Status DoForward(ConstDeviceView x, DeviceView y) override {
    LrnForwardKernel(shape_, x.data(), y.data(), pool_);
    return absl::OkStatus();
  }

  absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                          ConstDeviceView dy, DeviceView dx) override {
    LrnBackwardKernel(shape_, x.data(), y.data(), dy.data(), dx.data(), pool_);
    return absl::OkStatus();
  }

  const LrnShape shape_;
  ThreadPool* const pool_;  // Not owned.
};

class CpuSoftmaxCrossEntropy : public SoftmaxCrossEntropyOp {
 public:
  explicit CpuSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape& shape)
      : shape_(shape) {}
  const SoftmaxCrossEntropyShape& shape() const override { return shape_; }

 private:
  absl::StatusOr<CrossEntropyResult> DoRun(ConstDeviceView logits,
                                           absl::Span<const int32_t> labels,
                                           DeviceView dlogits) override {
    return SoftmaxCrossEntropyKernel(shape_.batch, shape_.classes,
                                     logits.data(), labels, dlogits.data());
  }

  const SoftmaxCrossEntropyShape shape_;
};

ThreadPool::Runtime PoolRuntime(ThreadPool::Runtime wanted) {
#if defined(__SANITIZE_THREAD__)
  (void)wanted;
  return ThreadPool::Runtime::kOwnThreads;
#else
  return wanted;
#endif
}

class CpuBackend : public Backend {
 public:
  CpuBackend(const CpuBackendOptions& options, int threads,
             OneDnnContext context)
      : options_(options),
        gemm_{options.gemm, threads},
        context_(std::move(context)),
        pool_(threads, PoolRuntime(options.pool)) {}

  std::string name() const override { return "cpu"; }

  absl::Status Synchronize() override { return absl::OkStatus(); }
  int64_t WorkspaceBytes() const override {
    return static_cast<int64_t>(context_.workspace.reserved());
  }
  int64_t ChannelBlock() const override {
    if (!options_.blocked_layout || options_.conv == ConvAlgorithm::kIm2col) {
      return 0;
    }
    return OneDnnChannelBlock();
  }

  absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateConv2d(
      const Conv2dShape& shape) override {
    if (options_.conv == ConvAlgorithm::kIm2col) {
      return CreateIm2colConv2d(shape, gemm_, &pool_);
    }
    if (RunsWinograd(options_) && WinogradConv2dApplies(shape)) {
      if (options_.conv == ConvAlgorithm::kWinograd) {
        return CreateWinogradConv2d(shape, &context_, &pool_);
      }
      return CreateMeasuredConv2d(shape);
    }
    return CreateOneDnnConv2d(shape, &context_, DirectCompute());
  }

  absl::StatusOr<std::unique_ptr<MaxPoolOp>> CreateMaxPool(
      const PoolShape& shape) override {
    RETURN_IF_ERROR(shape.Validate());
    return std::unique_ptr<MaxPoolOp>(
        std::make_unique<CpuMaxPool>(shape, &pool_));
  }

  absl::StatusOr<std::unique_ptr<LrnOp>> CreateLrn(
      const LrnShape& shape) override {
    if (options_.lrn == LrnAlgorithm::kOneDnn) {
      return CreateOneDnnLrn(shape, &context_);
    }
    RETURN_IF_ERROR(shape.Validate());
    return std::unique_ptr<LrnOp>(std::make_unique<CpuLrn>(shape, &pool_));
  }

  absl::StatusOr<std::unique_ptr<DenseOp>> CreateDense(
      const DenseShape& shape) override {
    return CreateCpuDense(shape, gemm_, &pool_);
  }

  absl::StatusOr<std::unique_ptr<SoftmaxCrossEntropyOp>>
  CreateSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape& shape) override {
    RETURN_IF_ERROR(shape.Validate());
    return std::unique_ptr<SoftmaxCrossEntropyOp>(
        std::make_unique<CpuSoftmaxCrossEntropy>(shape));
  }

  absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateBatchNorm(
      const BatchNormShape& shape) override {
    return CreateOneDnnBatchNorm(shape, &context_, &pool_);
  }

 private:
  absl::StatusOr<DeviceTensor> DoAllocate(const Shape& shape) override {
    constexpr size_t kAlignment = 64;
    const size_t bytes = (NumElements(shape) * sizeof(float) + kAlignment - 1) /
                         kAlignment * kAlignment;
    void* data = std::aligned_alloc(kAlignment, bytes);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: cannot allocate ", bytes, " bytes for ",
                       ShapeToString(shape)));
    }
    std::memset(data, 0, bytes);
    return DeviceTensor(static_cast<float*>(data), shape,
                        [](float* p) { std::free(p); });
  }

  absl::Status DoCopyToDevice(ConstTensorView src, DeviceView dst) override {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status DoCopyToHost(ConstDeviceView src, TensorView dst) override {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status DoAdd(ConstDeviceView a, ConstDeviceView b,
                     DeviceView y) override {
    AddKernel(y.size(), a.data(), b.data(), y.data(), &pool_);
    return absl::OkStatus();
  }

  absl::Status DoAddRelu(ConstDeviceView a, ConstDeviceView b,
                         DeviceView y) override {
    AddReluKernel(y.size(), a.data(), b.data(), y.data(), &pool_);
    return absl::OkStatus();
  }

  absl::Status DoCopy(ConstDeviceView src, DeviceView dst) override {
    if (src.data() != dst.data()) {
      std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::Status DoGlobalAvgPoolForward(ConstDeviceView x, int64_t channel_block,
                                      DeviceView y) override {
    GlobalAvgPoolForwardKernel(y.size(), x.dim(2) * x.dim(3), channel_block,
                               x.data(), y.data(), &pool_);
    return absl::OkStatus();
  }

  absl::Status DoGlobalAvgPoolBackward(ConstDeviceView dy,
                                       int64_t channel_block,
                                       DeviceView dx) override {
    GlobalAvgPoolBackwardKernel(dy.size(), dx.dim(2) * dx.dim(3), channel_block,
                                dy.data(), dx.data(), &pool_);
    return absl::OkStatus();
  }

  absl::Status DoReluForward(ConstDeviceView x, DeviceView y) override {
    ReluForwardKernel(x.size(), x.data(), y.data(), &pool_);
    return absl::OkStatus();
  }

  absl::Status DoReluBackward(ConstDeviceView y, ConstDeviceView dy,
                              DeviceView dx) override {
    ReluBackwardKernel(y.size(), y.data(), dy.data(), dx.data(), &pool_);
    return absl::OkStatus();
  }

  absl::StatusOr<double> DoL2WeightDecay(ConstDeviceView w, float decay,
                                         DeviceView dw) override {
    return L2WeightDecayKernel(w.size(), w.data(), decay, dw.data());
  }

  // What oneDNN's direct kernel computes in: compute=bf16's bfloat16 or
  // float32. (Winograd computes in float32 either way.)
  ConvCompute DirectCompute() const {
    return options_.bf16_compute ? ConvCompute::kBfloat16
                                 : ConvCompute::kFloat32;
  }

  // conv=auto where Winograd applies: the kernel the process's chooser
  // measured faster for this shape (conv_choice.h): Winograd (float32) or
  // the direct kernel in this backend's compute, which the key names, so
  // that a float32 and a bfloat16 backend of one process (or one cache
  // file) each choose for themselves. The key leaves out the bias and the
  // fused ReLU: an inference op with a batch norm folded into it
  // (network_model.cc) takes its training op's choice instead of timing
  // both kernels again, on a whole batch's buffers, while the step's arena
  // is held.
  absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateMeasuredConv2d(
      const Conv2dShape& shape) {
    ConvChooser* chooser = ProcessConvChooser();
    Conv2dShape geometry = shape;
    geometry.has_bias = true;
    geometry.relu = false;
    const std::string key =
        absl::StrCat(geometry.ToString(), ", ", pool_.num_threads(), " threads",
                     options_.bf16_compute ? ", direct in bfloat16" : "");
    if (std::optional<bool> cached = chooser->Cached(key); cached.has_value()) {
      if (*cached) return CreateWinogradConv2d(shape, &context_, &pool_);
      return CreateOneDnnConv2d(shape, &context_, DirectCompute());
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Conv2dOp> winograd,
                     CreateWinogradConv2d(shape, &context_, &pool_));
    ASSIGN_OR_RETURN(std::unique_ptr<Conv2dOp> direct,
                     CreateOneDnnConv2d(shape, &context_, DirectCompute()));
    ASSIGN_OR_RETURN(const bool use_winograd,
                     chooser->Choose(key, winograd.get(), direct.get()));
    return use_winograd ? std::move(winograd) : std::move(direct);
  }

  const CpuBackendOptions options_;
  const GemmConfig gemm_;
  OneDnnContext context_;
  ThreadPool pool_;
};

}  // namespace

absl::StatusOr<CpuBackendOptions> ParseCpuBackendName(absl::string_view name,
                                                      int threads) {
  CpuBackendOptions options;
  options.threads = threads;
  if (name == "cpu") return options;
  if (!absl::ConsumePrefix(&name, "cpu:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a CPU backend name: '", name, "'"));
  }
  for (absl::string_view item : absl::StrSplit(name, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first == "conv" && kv.second == "onednn") {
      options.conv = ConvAlgorithm::kOneDnn;
    } else if (kv.first == "conv" && kv.second == "im2col") {
      options.conv = ConvAlgorithm::kIm2col;
    } else if (kv.first == "conv" && kv.second == "winograd") {
      options.conv = ConvAlgorithm::kWinograd;
    } else if (kv.first == "conv" && kv.second == "auto") {
      options.conv = ConvAlgorithm::kAuto;
    } else if (kv.first == "gemm" && kv.second == "onednn") {
      options.gemm = GemmLibrary::kOneDnn;
    } else if (kv.first == "gemm" && kv.second == "openblas") {
      options.gemm = GemmLibrary::kOpenBlas;
    } else if (kv.first == "lrn" && kv.second == "fused") {
      options.lrn = LrnAlgorithm::kFused;
    } else if (kv.first == "lrn" && kv.second == "onednn") {
      options.lrn = LrnAlgorithm::kOneDnn;
    } else if (kv.first == "pool" && kv.second == "openmp") {
      options.pool = ThreadPool::Runtime::kOpenMp;
    } else if (kv.first == "pool" && kv.second == "threads") {
      options.pool = ThreadPool::Runtime::kOwnThreads;
    } else if (kv.first == "layout" && kv.second == "blocked") {
      options.blocked_layout = true;
    } else if (kv.first == "layout" && kv.second == "plain") {
      options.blocked_layout = false;
    } else if (kv.first == "compute" && kv.second == "f32") {
      options.bf16_compute = false;
    } else if (kv.first == "compute" && kv.second == "bf16") {
      options.bf16_compute = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "cpu backend option '", item,
          "' is not one of conv=auto, conv=onednn, conv=im2col, "
          "conv=winograd, "
          "gemm=onednn, "
          "gemm=openblas, lrn=fused, lrn=onednn, pool=openmp, pool=threads, "
          "layout=blocked, layout=plain, compute=f32, compute=bf16"));
    }
  }
  return options;
}

bool RunsWinograd(const CpuBackendOptions& options) {
  return (options.conv == ConvAlgorithm::kWinograd ||
          options.conv == ConvAlgorithm::kAuto) &&
         options.blocked_layout &&
         (__builtin_cpu_supports("avx512f") ||
          (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")));
}

std::vector<std::string> CpuConvChoices() {
  return ProcessConvChooser()->Notes();
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    const CpuBackendOptions& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu backend: threads is ", options.threads,
                     ", must be 0 (one per core) or more"));
  }
  int threads = options.threads;
  if (threads == 0) {
    threads =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  if (options.bf16_compute && options.conv == ConvAlgorithm::kIm2col) {
    return absl::InvalidArgumentError(
        "cpu backend: compute=bf16 runs oneDNN's convolutions; it does not "
        "go with conv=im2col");
  }
  if (options.bf16_compute && !OneDnnHasBf16()) {
    return absl::FailedPreconditionError(
        "cpu backend: compute=bf16 needs a CPU with AVX-512 BF16 "
        "(avx512_bf16 in /proc/cpuinfo) as oneDNN sees it; this one has none, "
        "or ONEDNN_MAX_CPU_ISA hides it");
  }
  OneDnnContext context;
  context.threads = threads;
  RETURN_IF_ERROR(CatchOneDnn("cpu backend: oneDNN engine", [&] {
    context.engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    context.stream = dnnl::stream(context.engine);
  }));
  return std::unique_ptr<Backend>(
      std::make_unique<CpuBackend>(options, threads, std::move(context)));
}

}  // namespace psgd
