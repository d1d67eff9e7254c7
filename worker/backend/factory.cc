#include "worker/backend/factory.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cpu/cpu_backend.h"

namespace psgd {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    absl::string_view name, const BackendOptions& options) {
  if (name == "cpu" || absl::StartsWith(name, "cpu:")) {
    ASSIGN_OR_RETURN(CpuBackendOptions cpu,
                     ParseCpuBackendName(name, options.threads));
    return CreateCpuBackend(cpu);
  }
  if (absl::StartsWith(name, "gpu:")) {
    return absl::UnimplementedError(absl::StrCat(
        "backend '", name, "': the CUDA backend is not part of this build"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown backend '", name, "' (expected cpu, cpu:OPTIONS or gpu:K)"));
}

}  // namespace psgd
