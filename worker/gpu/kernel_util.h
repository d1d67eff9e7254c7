// What the kernels in this folder share: launch sizes, grid-stride
// indexing, warp and block sums. Device code: included by .cu files only
// (nvcc), never by host C++.
//
// Thread-safety: device functions; BlockSum synchronises the block.
#ifndef PSGD_WORKER_GPU_KERNEL_UTIL_H_
#define PSGD_WORKER_GPU_KERNEL_UTIL_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace psgd::gpu {

constexpr int kWarpSize = 32;

// Threads per block of the element-wise kernels, and the most blocks their
// grid-stride loops need to fill an H100.
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// Blocks for a grid-stride loop over n elements (at least one).
inline int BlocksFor(int64_t n) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

// Kernels index with 32-bit integers when every index of the tensors they
// touch fits with room for a grid-stride step (64-bit division is several
// times slower), else with 64-bit ones; launchers pick with this.
inline bool FitsInt32(int64_t elements) {
  return elements < (int64_t{1} << 30);
}

// The first index of this thread and the stride of a grid-stride loop.
template <typename I>
__device__ __forceinline__ I GridStart() {
  return static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) +
         static_cast<I>(threadIdx.x);
}
template <typename I>
__device__ __forceinline__ I GridStride() {
  return static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
}

// The sum of `value` over the 32 lanes of a full warp, in every lane.
template <typename T>
__device__ __forceinline__ T WarpSum(T value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// The maximum of `value` over the 32 lanes of a full warp, in every lane.
__device__ __forceinline__ float WarpMax(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// The sum of `value` over the whole block (blockDim.x a multiple of 32, at
// most 1024), valid in thread 0. Every thread of the block must call it.
template <typename T>
__device__ __forceinline__ T BlockSum(T value) {
  __shared__ T partial[kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  value = WarpSum(value);
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  value = threadIdx.x < warps ? partial[threadIdx.x] : T(0);
  if (warp == 0) value = WarpSum(value);
  return value;
}

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_KERNEL_UTIL_H_
