// CUDA runtime errors as absl::Status, naming the call that failed:
//
//   CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
//     -> RESOURCE_EXHAUSTED "cudaMalloc failed: cudaErrorMemoryAllocation:
//        out of memory"
//   SomeKernel<<<grid, block, 0, stream>>>(...);
//   return KernelLaunchStatus("SomeKernel");
//
// Codes: RESOURCE_EXHAUSTED for out of memory, FAILED_PRECONDITION for a
// missing or unusable driver or device, INTERNAL for everything else.
// Header-only, so that nvcc-compiled launchers (.cu) and host code (.cc)
// share it. cuBLAS and cuDNN have their own (cublas_util.h, cudnn_util.h).
//
// Thread-safety: pure functions (cudaGetLastError reads the calling thread's
// last error).
#ifndef PSGD_WORKER_GPU_CUDA_STATUS_H_
#define PSGD_WORKER_GPU_CUDA_STATUS_H_

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace psgd::gpu {

// "cudaMalloc(&p, bytes)" -> "cudaMalloc": the function name of a call
// expression, for messages.
inline absl::string_view CallName(absl::string_view expression) {
  return expression.substr(0, expression.find('('));
}

inline absl::StatusCode CudaErrorCode(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// OK for cudaSuccess; else "<call> failed: <error name>: <description>".
inline absl::Status CudaStatus(cudaError_t error, absl::string_view call) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::Status(CudaErrorCode(error),
                      absl::StrCat(call, " failed: ", cudaGetErrorName(error),
                                   ": ", cudaGetErrorString(error)));
}

// The status of the kernel launch just made on this thread (a bad launch
// configuration, or an earlier asynchronous error that is still pending).
inline absl::Status KernelLaunchStatus(absl::string_view kernel) {
  return CudaStatus(cudaGetLastError(), absl::StrCat("launch of ", kernel));
}

// `status` with `prefix` put in front of its message (OK stays OK).
inline absl::Status WithPrefix(const absl::Status& status,
                               absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}
template <typename T>
absl::StatusOr<T> WithPrefix(absl::StatusOr<T> value,
                             absl::string_view prefix) {
  if (value.ok()) return value;
  return WithPrefix(value.status(), prefix);
}

}  // namespace psgd::gpu

// Evaluates a CUDA runtime call once; returns its error as a Status naming
// the function from the enclosing function.
#define CUDA_RETURN_IF_ERROR(expr)                                     \
  do {                                                                 \
    const ::absl::Status psgd_cuda_status_ =                           \
        ::psgd::gpu::CudaStatus((expr), ::psgd::gpu::CallName(#expr)); \
    if (!psgd_cuda_status_.ok()) return psgd_cuda_status_;             \
  } while (0)

#endif  // PSGD_WORKER_GPU_CUDA_STATUS_H_
