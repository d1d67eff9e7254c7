// cuDNN errors as absl::Status naming the call, and owners for a cuDNN
// handle and the (legacy API) descriptors the backend uses. cuDNN 9 marks
// the descriptor API deprecated (warnings only with CUDNN_WARN_DEPRECATED)
// but keeps it; moving to the graph API is a later step (docs/GPU.md).
//
// All cuDNN calls of the backend are in the files named cudnn_*.
//
// Thread-safety: these objects are used by one thread at a time (as their
// backend).
#ifndef PSGD_WORKER_GPU_CUDNN_UTIL_H_
#define PSGD_WORKER_GPU_CUDNN_UTIL_H_

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/gpu/cuda_status.h"

namespace psgd::gpu {

// OK for CUDNN_STATUS_SUCCESS; else "<call> failed: <name>: <cuDNN's last
// error message>", RESOURCE_EXHAUSTED for allocation failures,
// FAILED_PRECONDITION for a library that cannot run here (sub-library
// missing or mismatched, driver or architecture not supported), INTERNAL
// otherwise.
absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view call);

// The loaded cuDNN's version and the one compiled against, as
// "cuDNN 9.19.0 (built with 9.19.0)".
std::string CudnnVersionString();

// `value` as an int for a cuDNN dimension; INVALID_ARGUMENT naming `what`
// if it does not fit.
absl::StatusOr<int> CudnnDim(int64_t value, absl::string_view what);

}  // namespace psgd::gpu

#define CUDNN_RETURN_IF_ERROR(expr)                                     \
  do {                                                                  \
    const ::absl::Status psgd_cudnn_status_ =                           \
        ::psgd::gpu::CudnnStatus((expr), ::psgd::gpu::CallName(#expr)); \
    if (!psgd_cudnn_status_.ok()) return psgd_cudnn_status_;            \
  } while (0)

namespace psgd::gpu {

// Owns one cuDNN object (a handle or a descriptor) and destroys it with
// `Destroy`.
template <typename T, cudnnStatus_t (*Destroy)(T)>
class CudnnObject {
 public:
  CudnnObject() = default;
  explicit CudnnObject(T raw) : raw_(raw) {}
  ~CudnnObject() { Reset(); }
  CudnnObject(CudnnObject&& other) noexcept
      : raw_(std::exchange(other.raw_, nullptr)) {}
  CudnnObject& operator=(CudnnObject&& other) noexcept {
    if (this != &other) {
      Reset();
      raw_ = std::exchange(other.raw_, nullptr);
    }
    return *this;
  }
  CudnnObject(const CudnnObject&) = delete;
  CudnnObject& operator=(const CudnnObject&) = delete;

  T get() const { return raw_; }

 private:
  void Reset() {
    if (raw_ != nullptr) Destroy(raw_);
    raw_ = nullptr;
  }
  T raw_ = nullptr;
};

using CudnnHandle = CudnnObject<cudnnHandle_t, cudnnDestroy>;
using TensorDescriptor =
    CudnnObject<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    CudnnObject<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = CudnnObject<cudnnConvolutionDescriptor_t,
                                          cudnnDestroyConvolutionDescriptor>;
using LrnDescriptor =
    CudnnObject<cudnnLRNDescriptor_t, cudnnDestroyLRNDescriptor>;
using ActivationDescriptor =
    CudnnObject<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

// A handle on the current device whose work goes to `stream`.
absl::StatusOr<CudnnHandle> CreateCudnnHandle(cudaStream_t stream);

// A packed NCHW float32 tensor descriptor.
absl::StatusOr<TensorDescriptor> CreateTensorDescriptor(int64_t n, int64_t c,
                                                        int64_t h, int64_t w);

// Re-sets `desc` to a packed NCHW float32 (n, c, h, w).
absl::Status SetTensorDescriptor(const TensorDescriptor& desc, int64_t n,
                                 int64_t c, int64_t h, int64_t w);

// A float32 OIHW filter descriptor (k = output channels).
absl::StatusOr<FilterDescriptor> CreateFilterDescriptor(int64_t k, int64_t c,
                                                        int64_t h, int64_t w);

// A 2-D cross-correlation (TensorFlow's "convolution") with symmetric zero
// padding, the same stride along both axes, float32 accumulation, and the
// given math type.
absl::StatusOr<ConvolutionDescriptor> CreateConvolutionDescriptor(
    int64_t pad_h, int64_t pad_w, int64_t stride, cudnnMathType_t math);

// cuDNN's LRN: y = x / (k + alpha / n * window sum of x^2)^beta over a
// window of n channels.
absl::StatusOr<LrnDescriptor> CreateLrnDescriptor(unsigned n, double alpha,
                                                  double beta, double k);

// ReLU that propagates NaN (as std::max(x, 0.0f) does).
absl::StatusOr<ActivationDescriptor> CreateReluDescriptor();

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_CUDNN_UTIL_H_
