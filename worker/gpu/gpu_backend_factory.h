// The CUDA backend's entry point, as the backend factory sees it. Which
// definition is linked is decided by the build (worker/gpu/BUILD.bazel):
// with a usable CUDA toolkit, gpu_backend.cc's; without one, no_cuda.cc's,
// which always says FAILED_PRECONDITION "this build has no CUDA".
//
// Plain C++: no CUDA headers, so the factory compiles everywhere.
//
// Thread-safety: CreateGpuBackend may be called from any thread.
#ifndef PSGD_WORKER_GPU_GPU_BACKEND_FACTORY_H_
#define PSGD_WORKER_GPU_GPU_BACKEND_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/gpu/gpu_options.h"

namespace psgd {

// The CUDA backend on options.device (see gpu_options.h for the names that
// make options). FAILED_PRECONDITION when this build has no CUDA, or when
// there is no usable GPU: the message names the device and what
// cudaGetDeviceCount said (an error such as cudaErrorInsufficientDriver or
// cudaErrorNoDevice, zero devices, or fewer devices than options.device + 1).
// RESOURCE_EXHAUSTED / INTERNAL when creating the stream or the cuBLAS and
// cuDNN handles fails (the message names the call).
absl::StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(
    const GpuBackendOptions& options);

}  // namespace psgd

#endif  // PSGD_WORKER_GPU_GPU_BACKEND_FACTORY_H_
