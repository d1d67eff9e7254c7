#include "worker/gpu/cudnn_util.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace psgd::gpu {

absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view call) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  absl::StatusCode code = absl::StatusCode::kInternal;
  switch (status) {
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      code = absl::StatusCode::kResourceExhausted;
      break;
    case CUDNN_STATUS_NOT_INITIALIZED:
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      code = absl::StatusCode::kFailedPrecondition;
      break;
    default:
      break;
  }
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  return absl::Status(
      code, absl::StrCat(call, " failed: ", cudnnGetErrorString(status),
                         detail[0] != '\0' ? absl::StrCat(" (", detail, ")")
                                           : std::string()));
}

absl::StatusOr<int> CudnnDim(int64_t value, absl::string_view what) {
  if (value < 0 || value > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", value, ", beyond cuDNN's int dimensions"));
  }
  return static_cast<int>(value);
}

absl::StatusOr<CudnnHandle> CreateCudnnHandle(cudaStream_t stream) {
  cudnnHandle_t raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreate(&raw));
  CudnnHandle handle(raw);
  CUDNN_RETURN_IF_ERROR(cudnnSetStream(raw, stream));
  return handle;
}

absl::Status SetTensorDescriptor(const TensorDescriptor& desc, int64_t n,
                                 int64_t c, int64_t h, int64_t w) {
  absl::StatusOr<int> dims[4] = {CudnnDim(n, "n"), CudnnDim(c, "c"),
                                 CudnnDim(h, "h"), CudnnDim(w, "w")};
  for (const auto& d : dims) {
    if (!d.ok()) return d.status();
  }
  if (n * c * h * w > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor (", n, ", ", c, ", ", h, ", ", w,
                     ") has more elements than cuDNN's int indexing"));
  }
  CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(
      desc.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, *dims[0], *dims[1],
      *dims[2], *dims[3]));
  return absl::OkStatus();
}

absl::StatusOr<TensorDescriptor> CreateTensorDescriptor(int64_t n, int64_t c,
                                                        int64_t h, int64_t w) {
  cudnnTensorDescriptor_t raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&raw));
  TensorDescriptor desc(raw);
  absl::Status s = SetTensorDescriptor(desc, n, c, h, w);
  if (!s.ok()) return s;
  return desc;
}

absl::StatusOr<FilterDescriptor> CreateFilterDescriptor(int64_t k, int64_t c,
                                                        int64_t h, int64_t w) {
  absl::StatusOr<int> dims[4] = {
      CudnnDim(k, "out_channels"), CudnnDim(c, "in_channels"),
      CudnnDim(h, "kernel_h"), CudnnDim(w, "kernel_w")};
  for (const auto& d : dims) {
    if (!d.ok()) return d.status();
  }
  cudnnFilterDescriptor_t raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&raw));
  FilterDescriptor desc(raw);
  CUDNN_RETURN_IF_ERROR(
      cudnnSetFilter4dDescriptor(raw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                 *dims[0], *dims[1], *dims[2], *dims[3]));
  return desc;
}

absl::StatusOr<ConvolutionDescriptor> CreateConvolutionDescriptor(
    int64_t pad_h, int64_t pad_w, int64_t stride, cudnnMathType_t math) {
  absl::StatusOr<int> ph = CudnnDim(pad_h, "pad_h");
  if (!ph.ok()) return ph.status();
  absl::StatusOr<int> pw = CudnnDim(pad_w, "pad_w");
  if (!pw.ok()) return pw.status();
  absl::StatusOr<int> st = CudnnDim(stride, "stride");
  if (!st.ok()) return st.status();
  cudnnConvolutionDescriptor_t raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&raw));
  ConvolutionDescriptor desc(raw);
  CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
      raw, *ph, *pw, /*u=*/*st, /*v=*/*st, /*dilation_h=*/1, /*dilation_w=*/1,
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(raw, math));
  return desc;
}

absl::StatusOr<LrnDescriptor> CreateLrnDescriptor(unsigned n, double alpha,
                                                  double beta, double k) {
  cudnnLRNDescriptor_t raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateLRNDescriptor(&raw));
  LrnDescriptor desc(raw);
  CUDNN_RETURN_IF_ERROR(cudnnSetLRNDescriptor(raw, n, alpha, beta, k));
  return desc;
}

absl::StatusOr<ActivationDescriptor> CreateReluDescriptor() {
  cudnnActivationDescriptor_t raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnCreateActivationDescriptor(&raw));
  ActivationDescriptor desc(raw);
  CUDNN_RETURN_IF_ERROR(cudnnSetActivationDescriptor(
      raw, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, /*coef=*/0.0));
  return desc;
}

std::string CudnnVersionString() {
  // cuDNN 9 numbers versions major * 10000 + minor * 100 + patch.
  const size_t v = cudnnGetVersion();
  return absl::StrCat("cuDNN ", v / 10000, ".", v / 100 % 100, ".", v % 100,
                      " (built with ", CUDNN_MAJOR, ".", CUDNN_MINOR, ".",
                      CUDNN_PATCHLEVEL, ")");
}

}  // namespace psgd::gpu
