// Backends found by name, so that a flag or a config can pick one.
//
// Thread-safety: CreateBackend may be called from any thread.
#ifndef PSGD_WORKER_BACKEND_FACTORY_FACTORY_H_
#define PSGD_WORKER_BACKEND_FACTORY_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/backend/backend.h"

namespace psgd {

// Options every backend understands.
struct BackendOptions {
  // Threads for the backend's host-side arithmetic; 0 means one per core.
  int threads = 0;
};

// Creates a backend by name:
//   "cpu"        the CPU backend with its default kernels
//   "cpu:OPTS"   the CPU backend with chosen kernels, e.g.
//                "cpu:conv=im2col,gemm=openblas" (worker/cpu/cpu_backend.h
//                lists the choices)
//   "gpu:K"      the CUDA backend on device K; "gpu:K:OPTS" with options,
//                e.g. "gpu:0:tf32=on" (worker/gpu/gpu_options.h lists them)
// INVALID_ARGUMENT naming an unknown backend or option. For "gpu:K",
// FAILED_PRECONDITION when this build has no CUDA or there is no usable
// GPU K (worker/gpu/gpu_backend_factory.h).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    absl::string_view name, const BackendOptions& options);

}  // namespace psgd

#endif  // PSGD_WORKER_BACKEND_FACTORY_FACTORY_H_
