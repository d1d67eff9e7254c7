// Runs one nvcc-compiled kernel: proves that the CUDA toolchain wiring works
// on a machine with a GPU, and prints the driver's and the runtime's CUDA
// versions. Without a GPU it fails at once, saying "no GPU" and what
// cudaGetDeviceCount said. Tagged `gpu`.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "third_party/cuda/smoke_kernels.h"

namespace {

namespace smoke = psgd::cuda_smoke;

std::string Version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// REQUIREs a CUDA device, with a clear message when there is none.
void RequireGpu() {
  int count = 0;
  const int err = smoke::DeviceCount(&count);
  INFO("driver for CUDA " << Version(smoke::DriverVersion()) << ", runtime "
                          << Version(smoke::RuntimeVersion()));
  if (err != 0) {
    FAIL("no GPU: cudaGetDeviceCount failed with "
         << smoke::ErrorName(err) << " (" << smoke::ErrorString(err) << ")");
  }
  if (count == 0) FAIL("no GPU: cudaGetDeviceCount found no CUDA devices");
}

}  // namespace

TEST_CASE("a CUDA device is visible; the driver and runtime versions") {
  RequireGpu();
  WARN("device 0: " << smoke::DeviceName() << "; driver for CUDA "
                    << Version(smoke::DriverVersion()) << ", runtime "
                    << Version(smoke::RuntimeVersion()));
}

TEST_CASE("an nvcc-built kernel runs and computes saxpy") {
  RequireGpu();
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  const int err = smoke::Saxpy(n, 2.0f, x.data(), y.data());
  INFO(smoke::ErrorName(err) << ": " << smoke::ErrorString(err));
  REQUIRE(err == 0);
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == 2.0f * i + 1.0f);
}
