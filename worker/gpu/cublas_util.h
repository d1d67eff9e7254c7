// cuBLAS errors as absl::Status naming the call, and an owner for a cuBLAS
// handle bound to one stream.
//
// Thread-safety: a CublasHandle is used by one thread at a time (as its
// backend).
#ifndef PSGD_WORKER_GPU_CUBLAS_UTIL_H_
#define PSGD_WORKER_GPU_CUBLAS_UTIL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/gpu/cuda_status.h"

namespace psgd::gpu {

// OK for CUBLAS_STATUS_SUCCESS; else "<call> failed: <name>: <description>"
// with RESOURCE_EXHAUSTED for allocation failures, FAILED_PRECONDITION for a
// library that cannot run on this device, INTERNAL otherwise.
absl::Status CublasStatus(cublasStatus_t status, absl::string_view call);

// The loaded cuBLAS's version and the one compiled against, as
// "cuBLAS 13.1.0 (built with 13.1.0)".
std::string CublasVersionString();

class CublasHandle {
 public:
  CublasHandle() = default;
  // A handle on the current device whose work goes to `stream`, with TF32
  // tensor-core math when `tf32` (CUBLAS_TF32_TENSOR_OP_MATH) and plain
  // float32 otherwise (CUBLAS_DEFAULT_MATH).
  static absl::StatusOr<CublasHandle> Create(cudaStream_t stream, bool tf32);
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  explicit CublasHandle(cublasHandle_t handle) : handle_(handle) {}
  cublasHandle_t handle_ = nullptr;
};

}  // namespace psgd::gpu

#define CUBLAS_RETURN_IF_ERROR(expr)                                     \
  do {                                                                   \
    const ::absl::Status psgd_cublas_status_ =                           \
        ::psgd::gpu::CublasStatus((expr), ::psgd::gpu::CallName(#expr)); \
    if (!psgd_cublas_status_.ok()) return psgd_cublas_status_;           \
  } while (0)

#endif  // PSGD_WORKER_GPU_CUBLAS_UTIL_H_
