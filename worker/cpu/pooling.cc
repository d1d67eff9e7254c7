#include "worker/cpu/pooling.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace psgd {
namespace {

// The valid input rows (or columns) of output position `o`: [begin, end).
struct Window {
  int64_t begin;
  int64_t end;
};

Window WindowAt(int64_t o, const SamePadding& pad, int64_t window,
                int64_t stride, int64_t input) {
  const int64_t start = o * stride - pad.before;
  return {std::max<int64_t>(start, 0), std::min(start + window, input)};
}

// Index into the (H, W) plane `x` of the first maximum of the window.
int64_t ArgMax(const float* x, int64_t width, Window rows, Window cols) {
  int64_t best = rows.begin * width + cols.begin;
  float best_value = x[best];
  for (int64_t h = rows.begin; h < rows.end; ++h) {
    for (int64_t w = cols.begin; w < cols.end; ++w) {
      if (x[h * width + w] > best_value) {
        best_value = x[h * width + w];
        best = h * width + w;
      }
    }
  }
  return best;
}

}  // namespace

void MaxPoolForwardKernel(const PoolShape& s, const float* x, float* y,
                          ThreadPool* pool) {
  const SamePadding ph = ComputeSamePadding(s.height, s.window, s.stride);
  const SamePadding pw = ComputeSamePadding(s.width, s.window, s.stride);
  const int64_t in_plane = s.height * s.width;
  const int64_t out_plane = ph.output * pw.output;
  pool->ParallelFor(s.batch * s.channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float* xp = x + p * in_plane;
      float* yp = y + p * out_plane;
      for (int64_t oh = 0; oh < ph.output; ++oh) {
        const Window rows = WindowAt(oh, ph, s.window, s.stride, s.height);
        for (int64_t ow = 0; ow < pw.output; ++ow) {
          const Window cols = WindowAt(ow, pw, s.window, s.stride, s.width);
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t h = rows.begin; h < rows.end; ++h) {
            for (int64_t w = cols.begin; w < cols.end; ++w) {
              m = std::max(m, xp[h * s.width + w]);
            }
          }
          yp[oh * pw.output + ow] = m;
        }
      }
    }
  });
}

void MaxPoolBackwardKernel(const PoolShape& s, const float* x, const float* dy,
                           float* dx, ThreadPool* pool) {
  const SamePadding ph = ComputeSamePadding(s.height, s.window, s.stride);
  const SamePadding pw = ComputeSamePadding(s.width, s.window, s.stride);
  const int64_t in_plane = s.height * s.width;
  const int64_t out_plane = ph.output * pw.output;
  pool->ParallelFor(s.batch * s.channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float* xp = x + p * in_plane;
      const float* dyp = dy + p * out_plane;
      float* dxp = dx + p * in_plane;
      std::memset(dxp, 0, in_plane * sizeof(float));
      for (int64_t oh = 0; oh < ph.output; ++oh) {
        const Window rows = WindowAt(oh, ph, s.window, s.stride, s.height);
        for (int64_t ow = 0; ow < pw.output; ++ow) {
          const Window cols = WindowAt(ow, pw, s.window, s.stride, s.width);
          dxp[ArgMax(xp, s.width, rows, cols)] += dyp[oh * pw.output + ow];
        }
      }
    }
  });
}

}  // namespace psgd
