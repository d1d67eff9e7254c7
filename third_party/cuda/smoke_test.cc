// Runs one nvcc-compiled kernel: proves that the CUDA toolchain wiring works
// on a machine with a GPU. Tagged `gpu`.
#include <vector>

#include <catch2/catch.hpp>

#include "third_party/cuda/smoke_kernels.h"

TEST_CASE("an nvcc-built kernel runs and computes saxpy") {
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  REQUIRE(psgd::cuda_smoke::Saxpy(n, 2.0f, x.data(), y.data()) == 0);
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == 2.0f * i + 1.0f);
}
