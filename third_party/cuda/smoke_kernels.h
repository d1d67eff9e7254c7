// The CUDA build's smoke test: one kernel compiled by nvcc under Bazel and
// called from C++. Returns the cudaError_t of the launch (0 on success).
#ifndef PSGD_THIRD_PARTY_CUDA_SMOKE_KERNELS_H_
#define PSGD_THIRD_PARTY_CUDA_SMOKE_KERNELS_H_

namespace psgd::cuda_smoke {

// y[i] = a * x[i] + y[i] for host arrays of n floats, on device 0.
int Saxpy(int n, float a, const float* x, float* y);

// cudaGetDeviceCount's error (0 on success) and the count.
int DeviceCount(int* count);
// cudaGetErrorName and cudaGetErrorString of an error returned above.
const char* ErrorName(int error);
const char* ErrorString(int error);
// cudaDriverGetVersion (0 without a driver) and cudaRuntimeGetVersion, as
// 1000 * major + 10 * minor.
int DriverVersion();
int RuntimeVersion();
// Device 0's name, or "" when it cannot be read.
const char* DeviceName();

}  // namespace psgd::cuda_smoke

#endif  // PSGD_THIRD_PARTY_CUDA_SMOKE_KERNELS_H_
