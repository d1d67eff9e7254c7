// CreateGpuBackend for builds without a usable CUDA toolkit (chosen in
// BUILD.bazel from @local_cuda//:defs.bzl's CUDA_AVAILABLE).
#include "absl/strings/str_cat.h"
#include "worker/gpu/gpu_backend_factory.h"

#ifndef PSGD_CUDA_MISSING
#define PSGD_CUDA_MISSING "the CUDA toolkit was not found"
#endif

namespace psgd {

absl::StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(
    const GpuBackendOptions& options) {
  return absl::FailedPreconditionError(absl::StrCat(
      "backend '", options.ToString(),
      "': this build has no CUDA (when it was built, ", PSGD_CUDA_MISSING,
      "); rebuild on a machine with the CUDA toolkit (CUDA_PATH, default "
      "/usr/local/cuda), or use device cpu"));
}

}  // namespace psgd
