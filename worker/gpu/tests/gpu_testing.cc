#include "worker/gpu/tests/gpu_testing.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_join.h"
#include "worker/backend_factory/factory.h"
#include "worker/gpu/gpu_backend.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace testing {

std::vector<std::string> GpuBackendNames() {
  return {"gpu:0", "gpu:0:conv_algo=heuristic,lrn=kernel",
          "gpu:0:deterministic=on"};
}

std::unique_ptr<Backend> MakeGpuBackend(const std::string& name) {
  BackendOptions options;
  options.threads = 2;
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      CreateBackend(name, options);
  INFO(name << ": " << backend.status().ToString());
  REQUIRE(backend.ok());
  const std::string description = GpuDescription(**backend);
  if (!description.empty()) WARN(name << " on " << description);
  return std::move(backend).value();
}

Comparison RelativeError(const std::vector<float>& got,
                         const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  return Compare(got, want);
}

std::string PlanNotes(const Backend& backend) {
  return absl::StrJoin(GpuPlanNotes(backend), "\n");
}

}  // namespace testing
}  // namespace psgd
