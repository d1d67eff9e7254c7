#include "worker/cpu/pooling.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace psgd {
namespace {

// The valid input rows (or columns) of each output position: [begin, end).
struct Windows {
  std::vector<int64_t> begin, end;
};

Windows WindowsOf(int64_t input, int64_t window, int64_t stride) {
  const SamePadding pad = ComputeSamePadding(input, window, stride);
  Windows w;
  for (int64_t o = 0; o < pad.output; ++o) {
    const int64_t start = o * stride - pad.before;
    w.begin.push_back(std::max<int64_t>(start, 0));
    w.end.push_back(std::min(start + window, input));
  }
  return w;
}

// What every pooling kernel needs of a shape: the windows, the output's
// size and the floats of one (image, channel or channel block) plane in and
// out, with `block` channels per position (1 for NCHW).
struct Geometry {
  Windows rows, cols;
  int64_t oh_count, ow_count, in_plane, out_plane;
};

Geometry GeometryOf(const PoolShape& s, int64_t block) {
  Geometry g{WindowsOf(s.height, s.window, s.stride),
             WindowsOf(s.width, s.window, s.stride),
             0,
             0,
             0,
             0};
  g.oh_count = g.rows.begin.size();
  g.ow_count = g.cols.begin.size();
  g.in_plane = s.height * s.width * block;
  g.out_plane = g.oh_count * g.ow_count * block;
  return g;
}

// The channel-blocked layout, (N, C / B, H, W, B): each window's maximum
// over B channels at once (the backward serves NCHW too, as B = 1).
template <int B>
void MaxPoolForwardBlocked(const PoolShape& s, const float* x, float* y,
                           ThreadPool* pool) {
  const Geometry g = GeometryOf(s, B);
  pool->ParallelFor(
      s.batch * s.channels / B, 1, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
          const float* xp = x + p * g.in_plane;
          float* yp = y + p * g.out_plane;
          for (int64_t oh = 0; oh < g.oh_count; ++oh) {
            for (int64_t ow = 0; ow < g.ow_count; ++ow) {
              float m[B];
              const float* at =
                  xp + (g.rows.begin[oh] * s.width + g.cols.begin[ow]) * B;
              for (int l = 0; l < B; ++l) m[l] = at[l];
              for (int64_t h = g.rows.begin[oh]; h < g.rows.end[oh]; ++h) {
                for (int64_t w = g.cols.begin[ow]; w < g.cols.end[ow]; ++w) {
                  at = xp + (h * s.width + w) * B;
                  for (int l = 0; l < B; ++l) m[l] = std::max(m[l], at[l]);
                }
              }
              float* out = yp + (oh * g.ow_count + ow) * B;
              for (int l = 0; l < B; ++l) out[l] = m[l];
            }
          }
        }
      });
}

template <int B>
void MaxPoolBackwardBlocked(const PoolShape& s, const float* x, const float* dy,
                            float* dx, ThreadPool* pool) {
  const Geometry g = GeometryOf(s, B);
  pool->ParallelFor(
      s.batch * s.channels / B, 1, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
          const float* xp = x + p * g.in_plane;
          const float* dyp = dy + p * g.out_plane;
          float* dxp = dx + p * g.in_plane;
          std::memset(dxp, 0, g.in_plane * sizeof(float));
          for (int64_t oh = 0; oh < g.oh_count; ++oh) {
            for (int64_t ow = 0; ow < g.ow_count; ++ow) {
              // Per channel, the first maximum of the window in row-major
              // order, as the NCHW kernel.
              int64_t best[B];
              float best_value[B];
              const int64_t first_at =
                  g.rows.begin[oh] * s.width + g.cols.begin[ow];
              for (int l = 0; l < B; ++l) {
                best[l] = first_at;
                best_value[l] = xp[first_at * B + l];
              }
              for (int64_t h = g.rows.begin[oh]; h < g.rows.end[oh]; ++h) {
                for (int64_t w = g.cols.begin[ow]; w < g.cols.end[ow]; ++w) {
                  const int64_t at = h * s.width + w;
                  for (int l = 0; l < B; ++l) {
                    const float v = xp[at * B + l];
                    const bool greater = v > best_value[l];
                    best_value[l] = greater ? v : best_value[l];
                    best[l] = greater ? at : best[l];
                  }
                }
              }
              const float* grad = dyp + (oh * g.ow_count + ow) * B;
              for (int l = 0; l < B; ++l) dxp[best[l] * B + l] += grad[l];
            }
          }
        }
      });
}

}  // namespace

void MaxPoolForwardKernel(const PoolShape& s, const float* x, float* y,
                          ThreadPool* pool) {
  if (s.channel_block == 8) return MaxPoolForwardBlocked<8>(s, x, y, pool);
  if (s.channel_block == 16) return MaxPoolForwardBlocked<16>(s, x, y, pool);
  const Geometry g = GeometryOf(s, 1);
  pool->ParallelFor(s.batch * s.channels, 1, [&](int64_t first, int64_t last) {
    // Separable: the maximum over each output row's window of g.rows, for every
    // input column (a vector loop), then over each output's columns.
    std::vector<float> column_max(s.width);
    for (int64_t p = first; p < last; ++p) {
      const float* xp = x + p * g.in_plane;
      float* yp = y + p * g.out_plane;
      for (int64_t oh = 0; oh < g.oh_count; ++oh) {
        const float* row = xp + g.rows.begin[oh] * s.width;
        std::copy(row, row + s.width, column_max.begin());
        for (int64_t h = g.rows.begin[oh] + 1; h < g.rows.end[oh]; ++h) {
          row = xp + h * s.width;
          for (int64_t w = 0; w < s.width; ++w) {
            column_max[w] = std::max(column_max[w], row[w]);
          }
        }
        for (int64_t ow = 0; ow < g.ow_count; ++ow) {
          float m = column_max[g.cols.begin[ow]];
          for (int64_t w = g.cols.begin[ow] + 1; w < g.cols.end[ow]; ++w) {
            m = std::max(m, column_max[w]);
          }
          yp[oh * g.ow_count + ow] = m;
        }
      }
    }
  });
}

void MaxPoolBackwardKernel(const PoolShape& s, const float* x, const float* dy,
                           float* dx, ThreadPool* pool) {
  switch (s.channel_block) {
    case 8:
      return MaxPoolBackwardBlocked<8>(s, x, dy, dx, pool);
    case 16:
      return MaxPoolBackwardBlocked<16>(s, x, dy, dx, pool);
    default:  // NCHW: one channel per position
      return MaxPoolBackwardBlocked<1>(s, x, dy, dx, pool);
  }
}

}  // namespace psgd
