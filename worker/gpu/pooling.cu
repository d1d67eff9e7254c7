#include <algorithm>

#include "worker/gpu/cuda_status.h"
#include "worker/gpu/kernel_util.h"
#include "worker/gpu/pooling.h"

namespace psgd::gpu {
namespace {

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// PoolGeometry in the kernel's index type.
template <typename I>
struct Geometry {
  explicit Geometry(const PoolGeometry& g)
      : planes(static_cast<I>(g.planes)),
        height(static_cast<I>(g.height)),
        width(static_cast<I>(g.width)),
        out_height(static_cast<I>(g.out_height)),
        out_width(static_cast<I>(g.out_width)),
        window(static_cast<I>(g.window)),
        stride(static_cast<I>(g.stride)),
        pad_top(static_cast<I>(g.pad_top)),
        pad_left(static_cast<I>(g.pad_left)) {}
  I planes, height, width, out_height, out_width, window, stride, pad_top,
      pad_left;
};

// The valid input range [begin, end) of output position o along one
// dimension.
template <typename I>
__device__ __forceinline__ void WindowAt(I o, I stride, I pad, I window,
                                         I input, I* begin, I* end) {
  const I start = o * stride - pad;
  *begin = start > 0 ? start : 0;
  *end = start + window < input ? start + window : input;
}

// x: (planes, H, W) -> y: (planes, OH, OW); one thread per output.
template <typename I>
__global__ void MaxPoolForwardKernel(Geometry<I> g, const float* __restrict__ x,
                                     float* __restrict__ y) {
  const I total = g.planes * g.out_height * g.out_width;
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    const I plane = i / (g.out_height * g.out_width);
    const I oh = (i / g.out_width) % g.out_height;
    const I ow = i % g.out_width;
    I h0, h1, w0, w1;
    WindowAt(oh, g.stride, g.pad_top, g.window, g.height, &h0, &h1);
    WindowAt(ow, g.stride, g.pad_left, g.window, g.width, &w0, &w1);
    const float* xp = x + plane * g.height * g.width;
    float m = -INFINITY;
    for (I h = h0; h < h1; ++h) {
      for (I w = w0; w < w1; ++w) {
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
template <typename I>
__global__ void MaxPoolBackwardKernel(Geometry<I> g,
                                      const float* __restrict__ x,
                                      const float* __restrict__ dy,
                                      float* __restrict__ dx) {
  const I total = g.planes * g.height * g.width;
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    const I plane = i / (g.height * g.width);
    const I hh = (i / g.width) % g.height;
    const I ww = i % g.width;
    const float* xp = x + plane * g.height * g.width;
    const float* dyp = dy + plane * g.out_height * g.out_width;
    // Outputs o with o * stride - pad <= hh < o * stride - pad + window.
    const I lo_h = hh + g.pad_top - g.window + 1;
    const I lo_w = ww + g.pad_left - g.window + 1;
    const I oh0 = lo_h > 0 ? (lo_h + g.stride - 1) / g.stride : 0;
    const I ow0 = lo_w > 0 ? (lo_w + g.stride - 1) / g.stride : 0;
    const I oh_last = (hh + g.pad_top) / g.stride;
    const I ow_last = (ww + g.pad_left) / g.stride;
    const I oh1 = oh_last < g.out_height - 1 ? oh_last : g.out_height - 1;
    const I ow1 = ow_last < g.out_width - 1 ? ow_last : g.out_width - 1;
    float sum = 0.0f;
    for (I oh = oh0; oh <= oh1; ++oh) {
      I h0, h1;
      WindowAt(oh, g.stride, g.pad_top, g.window, g.height, &h0, &h1);
      for (I ow = ow0; ow <= ow1; ++ow) {
        I w0, w1;
        WindowAt(ow, g.stride, g.pad_left, g.window, g.width, &w0, &w1);
        // The first maximum of the window, as the CPU's ArgMax.
        I best = h0 * g.width + w0;
        float best_value = xp[best];
        for (I h = h0; h < h1; ++h) {
          for (I w = w0; w < w1; ++w) {
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
  if (FitsInt32(g.planes * g.height * g.width)) {  // the input is larger
    MaxPoolForwardKernel<int>
        <<<BlocksFor(total), kThreads, 0, stream>>>(Geometry<int>(g), x, y);
  } else {
    MaxPoolForwardKernel<int64_t>
        <<<BlocksFor(total), kThreads, 0, stream>>>(Geometry<int64_t>(g), x, y);
  }
  return KernelLaunchStatus("MaxPoolForwardKernel");
}

absl::Status LaunchMaxPoolBackward(const PoolGeometry& g, const float* x,
                                   const float* dy, float* dx,
                                   cudaStream_t stream) {
  const int64_t total = g.planes * g.height * g.width;
  if (FitsInt32(total)) {
    MaxPoolBackwardKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        Geometry<int>(g), x, dy, dx);
  } else {
    MaxPoolBackwardKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        Geometry<int64_t>(g), x, dy, dx);
  }
  return KernelLaunchStatus("MaxPoolBackwardKernel");
}

}  // namespace psgd::gpu
