#include "worker/backend_factory/factory.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/gpu/gpu_backend_factory.h"
#include "worker/gpu/gpu_options.h"

namespace psgd {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    absl::string_view name, const BackendOptions& options) {
  if (name == "cpu" || absl::StartsWith(name, "cpu:")) {
    ASSIGN_OR_RETURN(CpuBackendOptions cpu,
                     ParseCpuBackendName(name, options.threads));
    return CreateCpuBackend(cpu);
  }
  if (absl::StartsWith(name, "gpu:")) {
    ASSIGN_OR_RETURN(GpuBackendOptions gpu, ParseGpuBackendName(name));
    return CreateGpuBackend(gpu);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown backend '", name, "' (expected cpu, cpu:OPTIONS or gpu:K)"));
}

}  // namespace psgd
