#include "worker/cpu/pooling.h"

#include <algorithm>
#include <cstring>

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

// Calls out_fn(p, o, rows, cols) for output o of every (n, c) plane p, with
// the output's window; planes are split over the pool's threads, and
// plane_fn(p) runs before a plane's outputs.
template <typename PlaneFn, typename OutputFn>
void ForEachWindow(const PoolShape& s, ThreadPool* pool, PlaneFn plane_fn,
                   OutputFn out_fn) {
  const SamePadding ph = ComputeSamePadding(s.height, s.window, s.stride);
  const SamePadding pw = ComputeSamePadding(s.width, s.window, s.stride);
  pool->ParallelFor(s.batch * s.channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      plane_fn(p);
      for (int64_t oh = 0; oh < ph.output; ++oh) {
        const Window rows = WindowAt(oh, ph, s.window, s.stride, s.height);
        for (int64_t ow = 0; ow < pw.output; ++ow) {
          out_fn(p, oh * pw.output + ow, rows,
                 WindowAt(ow, pw, s.window, s.stride, s.width));
        }
      }
    }
  });
}

}  // namespace

void MaxPoolForwardKernel(const PoolShape& s, const float* x, float* y,
                          ThreadPool* pool) {
  const int64_t in_plane = s.height * s.width;
  const int64_t out_plane = NumElements(s.output()) / (s.batch * s.channels);
  ForEachWindow(
      s, pool, [](int64_t) {},
      [&](int64_t p, int64_t o, Window rows, Window cols) {
        const float* xp = x + p * in_plane;
        y[p * out_plane + o] = xp[ArgMax(xp, s.width, rows, cols)];
      });
}

void MaxPoolBackwardKernel(const PoolShape& s, const float* x, const float* dy,
                           float* dx, ThreadPool* pool) {
  const int64_t in_plane = s.height * s.width;
  const int64_t out_plane = NumElements(s.output()) / (s.batch * s.channels);
  ForEachWindow(
      s, pool,
      [&](int64_t p) {
        std::memset(dx + p * in_plane, 0, in_plane * sizeof(float));
      },
      [&](int64_t p, int64_t o, Window rows, Window cols) {
        const float* xp = x + p * in_plane;
        dx[p * in_plane + ArgMax(xp, s.width, rows, cols)] +=
            dy[p * out_plane + o];
      });
}

}  // namespace psgd
