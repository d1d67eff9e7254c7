#include <algorithm>

#include "worker/gpu/cuda_status.h"
#include "worker/gpu/pooling.h"

namespace psgd::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

int BlocksFor(int64_t n) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// The valid input range [begin, end) of output position o along one
// dimension.
__device__ __forceinline__ void WindowAt(int64_t o, int64_t stride, int64_t pad,
                                         int64_t window, int64_t input,
                                         int64_t* begin, int64_t* end) {
  const int64_t start = o * stride - pad;
  *begin = start > 0 ? start : 0;
  *end = start + window < input ? start + window : input;
}

// x: (planes, H, W) -> y: (planes, OH, OW); one thread per output.
__global__ void MaxPoolForwardKernel(PoolGeometry g,
                                     const float* __restrict__ x,
                                     float* __restrict__ y) {
  const int64_t total = g.planes * g.out_height * g.out_width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t plane = i / (g.out_height * g.out_width);
    const int64_t oh = (i / g.out_width) % g.out_height;
    const int64_t ow = i % g.out_width;
    int64_t h0, h1, w0, w1;
    WindowAt(oh, g.stride, g.pad_top, g.window, g.height, &h0, &h1);
    WindowAt(ow, g.stride, g.pad_left, g.window, g.width, &w0, &w1);
    const float* xp = x + plane * g.height * g.width;
    float m = -INFINITY;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) {
        const float v = xp[h * g.width + w];
        if (v > m) m = v;  // as std::max(m, v): NaN never wins
      }
    }
    y[i] = m;
  }
}

// x: (planes, H, W); dy: (planes, OH, OW) -> dx: (planes, H, W); one thread
// per input element, visiting the outputs whose window holds it in
// row-major order.
__global__ void MaxPoolBackwardKernel(PoolGeometry g,
                                      const float* __restrict__ x,
                                      const float* __restrict__ dy,
                                      float* __restrict__ dx) {
  const int64_t total = g.planes * g.height * g.width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t plane = i / (g.height * g.width);
    const int64_t hh = (i / g.width) % g.height;
    const int64_t ww = i % g.width;
    const float* xp = x + plane * g.height * g.width;
    const float* dyp = dy + plane * g.out_height * g.out_width;
    // Outputs o with o * stride - pad <= hh < o * stride - pad + window.
    const int64_t lo_h = hh + g.pad_top - g.window + 1;
    const int64_t lo_w = ww + g.pad_left - g.window + 1;
    const int64_t oh0 = lo_h > 0 ? (lo_h + g.stride - 1) / g.stride : 0;
    const int64_t ow0 = lo_w > 0 ? (lo_w + g.stride - 1) / g.stride : 0;
    const int64_t oh1 = min((hh + g.pad_top) / g.stride, g.out_height - 1);
    const int64_t ow1 = min((ww + g.pad_left) / g.stride, g.out_width - 1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      int64_t h0, h1;
      WindowAt(oh, g.stride, g.pad_top, g.window, g.height, &h0, &h1);
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        int64_t w0, w1;
        WindowAt(ow, g.stride, g.pad_left, g.window, g.width, &w0, &w1);
        // The first maximum of the window, as the CPU's ArgMax.
        int64_t best = h0 * g.width + w0;
        float best_value = xp[best];
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) {
            if (xp[h * g.width + w] > best_value) {
              best_value = xp[h * g.width + w];
              best = h * g.width + w;
            }
          }
        }
        if (best == hh * g.width + ww) sum += dyp[oh * g.out_width + ow];
      }
    }
    dx[i] = sum;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------

absl::Status LaunchMaxPoolForward(const PoolGeometry& g, const float* x,
                                  float* y, cudaStream_t stream) {
  const int64_t total = g.planes * g.out_height * g.out_width;
  MaxPoolForwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(g, x, y);
  return KernelLaunchStatus("MaxPoolForwardKernel");
}

absl::Status LaunchMaxPoolBackward(const PoolGeometry& g, const float* x,
                                   const float* dy, float* dx,
                                   cudaStream_t stream) {
  const int64_t total = g.planes * g.height * g.width;
  MaxPoolBackwardKernel<<<BlocksFor(total), kThreads, 0, stream>>>(g, x, dy,
                                                                   dx);
  return KernelLaunchStatus("MaxPoolBackwardKernel");
}

}  // namespace psgd::gpu
