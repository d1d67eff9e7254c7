// The CUDA build's smoke test: one kernel compiled by nvcc under Bazel and
// called from C++. Returns the cudaError_t of the launch (0 on success).
#ifndef PSGD_THIRD_PARTY_CUDA_SMOKE_KERNELS_H_
#define PSGD_THIRD_PARTY_CUDA_SMOKE_KERNELS_H_

namespace psgd::cuda_smoke {

// y[i] = a * x[i] + y[i] for host arrays of n floats, on device 0.
int Saxpy(int n, float a, const float* x, float* y);

}  // namespace psgd::cuda_smoke

#endif  // PSGD_THIRD_PARTY_CUDA_SMOKE_KERNELS_H_
