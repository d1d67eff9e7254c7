#include "worker/cpu/conv_winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

// Channels per block of the activations, and floats per AVX-512 register.
constexpr int64_t kLanes = 16;
// Elements of a transformed 4x4 tile (e = 4 i + j).
constexpr int64_t kElements = 16;
// Tiles per step of the matrix product's kernel (its rows).
constexpr int64_t kRows = 8;
// The bytes of V and M one chunk of tiles may take: most of a 1 MB L2 cache.
constexpr int64_t kChunkBudget = 768 * 1024;
constexpr int64_t kMaxChunkTiles = 512;

// Why `shape` does not run as F(2x2, 3x3) on this CPU, or "" when it does.
std::string Refusal(const Conv2dShape& shape) {
  if (shape.kernel_h != 3 || shape.kernel_w != 3) {
    return "the filter is not 3x3";
  }
  if (shape.stride != 1) return "the stride is not 1";
  const SamePadding ph = shape.pad_h();
  const SamePadding pw = shape.pad_w();
  if (ph.before != 1 || ph.after != 1 || pw.before != 1 || pw.after != 1) {
    return "the padding is not 1 on every side";
  }
  if (shape.in_block != kLanes || shape.out_block != kLanes) {
    return "the activations are not in 16-channel blocks";
  }
  if (!__builtin_cpu_supports("avx512f")) return "the CPU has no AVX-512";
  return "";
}

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Where tile t lies: its image, the top-left of its 2x2 outputs, and
// whether its second row and column are inside the image.
struct TileAt {
  int64_t image = 0;
  int64_t h = 0;
  int64_t w = 0;
  bool row1 = false;
  bool col1 = false;
};

// The 2x2 output tiles of an (N, C, H, W) activation: `rows` x `cols` per
// image (the last row or column half outside when H or W is odd).
struct Tiles {
  int64_t batch = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t count() const { return batch * rows * cols; }
  TileAt At(int64_t t) const {
    const int64_t r = t % (rows * cols);
    TileAt at;
    at.image = t / (rows * cols);
    at.h = 2 * (r / cols);
    at.w = 2 * (r % cols);
    at.row1 = at.h + 1 < height;
    at.col1 = at.w + 1 < width;
    return at;
  }
};

// One F(2x2, 3x3) convolution: `in` (in_channels, blocked) -> `out`
// (out_channels, blocked), with the transformed filters `u`.
struct Pass {
  const float* in = nullptr;
  int64_t in_channels = 0;
  const float* u = nullptr;  // [kElements][in_channels][out_channels]
  int64_t out_channels = 0;
  const float* bias = nullptr;  // or null
  bool relu = false;
  float* out = nullptr;
  Tiles tiles;
  int64_t chunk_tiles = 0;  // rows of V and M per chunk (a multiple of kRows)
};

// u (4x4) = G g G^T, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
void FilterTile(const float g[9], float u[kElements]) {
  float t[4][3];
  for (int j = 0; j < 3; ++j) {
    const float a = g[j], b = g[3 + j], c = g[6 + j];
    t[0][j] = a;
    t[1][j] = 0.5f * (a + b + c);
    t[2][j] = 0.5f * (a - b + c);
    t[3][j] = c;
  }
  for (int i = 0; i < 4; ++i) {
    const float a = t[i][0], b = t[i][1], c = t[i][2];
    u[4 * i + 0] = a;
    u[4 * i + 1] = 0.5f * (a + b + c);
    u[4 * i + 2] = 0.5f * (a - b + c);
    u[4 * i + 3] = c;
  }
}

// U[e][a][o] for the filters w (OIHW, (O, C, 3, 3)). The forward reads
// channel a of the input and writes channel o of the output: U from
// w[o][a]. The backward data reads dy's channel a (an output channel) and
// writes dx's channel o (an input channel): U from w[a][o] turned by 180
// degrees.
void TransformFilters(const float* w, int64_t ins, int64_t outs,
                      bool backward_data, float* u, ThreadPool* pool) {
  pool->ParallelFor(ins, 1, [&](int64_t begin, int64_t end) {
    float g[9];
    float t[kElements];
    for (int64_t a = begin; a < end; ++a) {
      for (int64_t o = 0; o < outs; ++o) {
        if (backward_data) {
          const float* src = w + (a * outs + o) * 9;
          for (int i = 0; i < 9; ++i) g[i] = src[8 - i];
        } else {
          std::memcpy(g, w + (o * ins + a) * 9, sizeof(g));
        }
        FilterTile(g, t);
        for (int64_t e = 0; e < kElements; ++e) {
          u[(e * ins + a) * outs + o] = t[e];
        }
      }
    }
  });
}

// V[e][t - t0][c] = (B^T d B)[e] for tiles [t0, t1), where d is the tile's
// 4x4 input block (zero outside the image) and
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
__attribute__((target("avx512f"))) void InputTransform(const Pass& p,
                                                       int64_t t0, int64_t t1,
                                                       int64_t v_stride,
                                                       float* v) {
  const Tiles& g = p.tiles;
  const int64_t blocks = p.in_channels / kLanes;
  const int64_t plane = g.height * g.width * kLanes;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t t = t0; t < t1; ++t) {
    const TileAt at = g.At(t);
    const int64_t n = at.image;
    // The 4x4 input block starts one row and column before the outputs.
    const int64_t h0 = at.h - 1;
    const int64_t w0 = at.w - 1;
    bool row_in[4], col_in[4];
    for (int i = 0; i < 4; ++i) {
      row_in[i] = h0 + i >= 0 && h0 + i < g.height;
      col_in[i] = w0 + i >= 0 && w0 + i < g.width;
    }
    float* vt = v + (t - t0) * p.in_channels;
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const float* src = p.in + (n * blocks + cb) * plane;
      __m512 d[4][4];
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
          d[i][j] = row_in[i] && col_in[j]
                        ? _mm512_loadu_ps(src + ((h0 + i) * g.width + w0 + j) *
                                                    kLanes)
                        : zero;
        }
      }
      __m512 b[4][4];
      for (int j = 0; j < 4; ++j) {
        b[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
        b[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
        b[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
        b[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
      }
      float* dst = vt + cb * kLanes;
      for (int i = 0; i < 4; ++i) {
        _mm512_storeu_ps(dst + (4 * i + 0) * v_stride,
                         _mm512_sub_ps(b[i][0], b[i][2]));
        _mm512_storeu_ps(dst + (4 * i + 1) * v_stride,
                         _mm512_add_ps(b[i][1], b[i][2]));
        _mm512_storeu_ps(dst + (4 * i + 2) * v_stride,
                         _mm512_sub_ps(b[i][2], b[i][1]));
        _mm512_storeu_ps(dst + (4 * i + 3) * v_stride,
                         _mm512_sub_ps(b[i][1], b[i][3]));
      }
    }
  }
}

// c (kRows x 16 kVectors) = op(a) . b, or += with kAccumulate, where op(a)
// is kRows x depth: a itself, row-major with row stride lda, or with
// kTransposeA the transpose of a (depth x kRows, row stride lda); b is
// (depth x 16 kVectors). Row strides ldb, ldc; the sums in registers.
template <int kVectors, bool kAccumulate, bool kTransposeA>
__attribute__((target("avx512f"), always_inline)) inline void ProductKernel(
    const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
    int64_t ldc, int64_t depth) {
  __m512 acc[kRows][kVectors];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      acc[r][v] = kAccumulate ? _mm512_loadu_ps(c + r * ldc + v * kLanes)
                              : _mm512_setzero_ps();
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    __m512 bk[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      bk[v] = _mm512_loadu_ps(b + k * ldb + v * kLanes);
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512 ar =
          _mm512_set1_ps(kTransposeA ? a[k * lda + r] : a[r * lda + k]);
      for (int v = 0; v < kVectors; ++v) {
        acc[r][v] = _mm512_fmadd_ps(ar, bk[v], acc[r][v]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      _mm512_storeu_ps(c + r * ldc + v * kLanes, acc[r][v]);
    }
  }
}

// c (rows x cols) = op(a) . b (+= with kAccumulate), op(a) (rows x depth)
// being a (rows x depth) or, with kTransposeA, a^T of a (depth x rows); b
// is (depth x cols), all row-major and dense; rows a multiple of kRows and
// cols of 16. Column strips outside, so that a strip of b stays in the L1
// cache while every row block passes it.
template <bool kAccumulate, bool kTransposeA>
__attribute__((target("avx512f"))) void Product(const float* a, const float* b,
                                                float* c, int64_t rows,
                                                int64_t cols, int64_t depth) {
  const int64_t lda = kTransposeA ? rows : depth;
  const int64_t row_step = kTransposeA ? 1 : depth;  // a's, per row of c
  int64_t col = 0;
  for (; col + 2 * kLanes <= cols; col += 2 * kLanes) {
    for (int64_t r = 0; r < rows; r += kRows) {
      ProductKernel<2, kAccumulate, kTransposeA>(a + r * row_step, lda, b + col,
                                                 cols, c + r * cols + col, cols,
                                                 depth);
    }
  }
  for (; col < cols; col += kLanes) {
    for (int64_t r = 0; r < rows; r += kRows) {
      ProductKernel<1, kAccumulate, kTransposeA>(a + r * row_step, lda, b + col,
                                                 cols, c + r * cols + col, cols,
                                                 depth);
    }
  }
}

// The outputs of tiles [t0, t1): y (2x2) = A^T m A (+ bias, ReLU), where m
// is M[e][t - t0] and A^T = [1 1 1 0; 0 1 -1 -1].
__attribute__((target("avx512f"))) void OutputTransform(const Pass& p,
                                                        int64_t t0, int64_t t1,
                                                        int64_t m_stride,
                                                        const float* m) {
  const Tiles& g = p.tiles;
  const int64_t blocks = p.out_channels / kLanes;
  const int64_t plane = g.height * g.width * kLanes;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t t = t0; t < t1; ++t) {
    const TileAt at = g.At(t);
    const int64_t n = at.image, h0 = at.h, w0 = at.w;
    const bool row1 = at.row1, col1 = at.col1;
    const float* mt = m + (t - t0) * p.out_channels;
    for (int64_t kb = 0; kb < blocks; ++kb) {
      __m512 x[kElements];
      for (int e = 0; e < kElements; ++e) {
        x[e] = _mm512_loadu_ps(mt + e * m_stride + kb * kLanes);
      }
      __m512 s[2][4];
      for (int j = 0; j < 4; ++j) {
        s[0][j] = _mm512_add_ps(_mm512_add_ps(x[j], x[4 + j]), x[8 + j]);
        s[1][j] = _mm512_sub_ps(_mm512_sub_ps(x[4 + j], x[8 + j]), x[12 + j]);
      }
      __m512 y[2][2];
      for (int i = 0; i < 2; ++i) {
        y[i][0] = _mm512_add_ps(_mm512_add_ps(s[i][0], s[i][1]), s[i][2]);
        y[i][1] = _mm512_sub_ps(_mm512_sub_ps(s[i][1], s[i][2]), s[i][3]);
      }
      if (p.bias != nullptr) {
        const __m512 bias = _mm512_loadu_ps(p.bias + kb * kLanes);
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 2; ++j) y[i][j] = _mm512_add_ps(y[i][j], bias);
        }
      }
      if (p.relu) {
        for (int i = 0; i < 2; ++i) {
          // (The masked form: GCC 12 warns that _mm512_max_ps's
          // placeholder source may be uninitialised.)
          for (int j = 0; j < 2; ++j) {
            y[i][j] = _mm512_mask_max_ps(y[i][j], 0xFFFF, y[i][j], zero);
          }
        }
      }
      float* dst = p.out + (n * blocks + kb) * plane;
      _mm512_storeu_ps(dst + (h0 * g.width + w0) * kLanes, y[0][0]);
      if (col1) {
        _mm512_storeu_ps(dst + (h0 * g.width + w0 + 1) * kLanes, y[0][1]);
      }
      if (row1) {
        _mm512_storeu_ps(dst + ((h0 + 1) * g.width + w0) * kLanes, y[1][0]);
        if (col1) {
          _mm512_storeu_ps(dst + ((h0 + 1) * g.width + w0 + 1) * kLanes,
                           y[1][1]);
        }
      }
    }
  }
}

// Tiles [t0, t1) through the three steps, in the chunk's V and M.
__attribute__((target("avx512f"))) void RunChunk(const Pass& p, int64_t t0,
                                                 int64_t t1, float* v,
                                                 float* m) {
  const int64_t count = t1 - t0;
  const int64_t rows = RoundUp(count, kRows);
  const int64_t v_stride = p.chunk_tiles * p.in_channels;
  const int64_t m_stride = p.chunk_tiles * p.out_channels;
  InputTransform(p, t0, t1, v_stride, v);
  if (rows > count) {
    // The kernel's last row block reads whole rows: zeros past the tiles.
    for (int64_t e = 0; e < kElements; ++e) {
      std::memset(v + e * v_stride + count * p.in_channels, 0,
                  (rows - count) * p.in_channels * sizeof(float));
    }
  }
  for (int64_t e = 0; e < kElements; ++e) {
    Product</*kAccumulate=*/false, /*kTransposeA=*/false>(
        v + e * v_stride, p.u + e * p.in_channels * p.out_channels,
        m + e * m_stride, rows, p.out_channels, p.in_channels);
  }
  OutputTransform(p, t0, t1, m_stride, m);
}

// The filter gradient, as F(3x3, 2x2): each tile's 2x2 block of dy g and
// 4x4 block of x d give that tile's share of dw (3x3), A'^T [(G' g G'^T) .
// (B'^T d B')] A' with
//   G'   = [1 0; 1/2 1/2; 1/2 -1/2; 0 1],
//   B'^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1],
//   A'^T = [1 1 1 0; 0 1 -1 0; 0 1 1 1].
// B'^T is the forward's B^T with its last row negated, so x's transform is
// InputTransform's and the signs go onto the sums (kFilterSign). The sum
// over tiles is taken in the transformed domain, as sixteen products
// W[e] (out x in) += DY[e]^T . X[e], and transformed back once.
constexpr float kFilterSign[kElements] = {1, 1, 1, -1, 1,  1,  1,  -1,
                                          1, 1, 1, -1, -1, -1, -1, 1};

// DY[e][t - t0][k] = (G' g G'^T)[e] for tiles [t0, t1) of dy (p.in, with
// p.in_channels channels), g the tile's 2x2 block (zero outside); adds each
// block's sum to `bias_sum` (p.in_channels floats).
__attribute__((target("avx512f"))) void GradientTransform(
    const Pass& p, int64_t t0, int64_t t1, int64_t stride, float* out,
    float* bias_sum) {
  const Tiles& g = p.tiles;
  const int64_t blocks = p.in_channels / kLanes;
  const int64_t plane = g.height * g.width * kLanes;
  const __m512 zero = _mm512_setzero_ps();
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t t = t0; t < t1; ++t) {
    const TileAt at = g.At(t);
    const int64_t n = at.image, h0 = at.h, w0 = at.w;
    const bool row1 = at.row1, col1 = at.col1;
    float* ot = out + (t - t0) * p.in_channels;
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const float* src = p.in + (n * blocks + kb) * plane;
      __m512 d[2][2];
      d[0][0] = _mm512_loadu_ps(src + (h0 * g.width + w0) * kLanes);
      d[0][1] =
          col1 ? _mm512_loadu_ps(src + (h0 * g.width + w0 + 1) * kLanes) : zero;
      d[1][0] = row1 ? _mm512_loadu_ps(src + ((h0 + 1) * g.width + w0) * kLanes)
                     : zero;
      d[1][1] =
          row1 && col1
              ? _mm512_loadu_ps(src + ((h0 + 1) * g.width + w0 + 1) * kLanes)
              : zero;
      float* sum = bias_sum + kb * kLanes;
      _mm512_storeu_ps(
          sum, _mm512_add_ps(_mm512_loadu_ps(sum),
                             _mm512_add_ps(_mm512_add_ps(d[0][0], d[0][1]),
                                           _mm512_add_ps(d[1][0], d[1][1]))));
      // Columns: c[i] = (d0, (d0 + d1) / 2, (d0 - d1) / 2, d1) of row i.
      __m512 c[2][4];
      for (int i = 0; i < 2; ++i) {
        c[i][0] = d[i][0];
        c[i][1] = _mm512_mul_ps(half, _mm512_add_ps(d[i][0], d[i][1]));
        c[i][2] = _mm512_mul_ps(half, _mm512_sub_ps(d[i][0], d[i][1]));
        c[i][3] = d[i][1];
      }
      float* dst = ot + kb * kLanes;
      for (int j = 0; j < 4; ++j) {
        _mm512_storeu_ps(dst + (0 + j) * stride, c[0][j]);
        _mm512_storeu_ps(dst + (4 + j) * stride,
                         _mm512_mul_ps(half, _mm512_add_ps(c[0][j], c[1][j])));
        _mm512_storeu_ps(dst + (8 + j) * stride,
                         _mm512_mul_ps(half, _mm512_sub_ps(c[0][j], c[1][j])));
        _mm512_storeu_ps(dst + (12 + j) * stride, c[1][j]);
      }
    }
  }
}

// One chunk of the filter gradient: x's tiles (InputTransform) into `v`,
// dy's (GradientTransform) into `g`, their products added to `w`
// ([kElements][outs][ins]) and dy's sums to `bias_sum`. `x` is the pass of
// x (p.in, p.in_channels); `dy` of dy.
__attribute__((target("avx512f"))) void RunFilterChunk(
    const Pass& x, const Pass& dy, int64_t t0, int64_t t1, float* v, float* g,
    float* w, float* bias_sum) {
  const int64_t count = t1 - t0;
  const int64_t v_stride = x.chunk_tiles * x.in_channels;
  const int64_t g_stride = x.chunk_tiles * dy.in_channels;
  InputTransform(x, t0, t1, v_stride, v);
  GradientTransform(dy, t0, t1, g_stride, g, bias_sum);
  for (int64_t e = 0; e < kElements; ++e) {
    Product</*kAccumulate=*/true, /*kTransposeA=*/true>(
        g + e * g_stride, v + e * v_stride,
        w + e * dy.in_channels * x.in_channels, dy.in_channels, x.in_channels,
        count);
  }
}

// dw[o][c] (3x3, OIHW) = A'^T (kFilterSign . W[.][o][c]) A' for o in
// [begin, end).
void FilterOutput(const float* w, int64_t outs, int64_t ins, int64_t begin,
                  int64_t end, float* dw) {
  for (int64_t o = begin; o < end; ++o) {
    for (int64_t c = 0; c < ins; ++c) {
      float m[kElements];
      for (int64_t e = 0; e < kElements; ++e) {
        m[e] = kFilterSign[e] * w[(e * outs + o) * ins + c];
      }
      // Rows: s = A'^T m (3 x 4); then s A' (3 x 3).
      float s[3][4];
      for (int j = 0; j < 4; ++j) {
        s[0][j] = m[j] + m[4 + j] + m[8 + j];
        s[1][j] = m[4 + j] - m[8 + j];
        s[2][j] = m[4 + j] + m[8 + j] + m[12 + j];
      }
      float* out = dw + (o * ins + c) * 9;
      for (int i = 0; i < 3; ++i) {
        out[3 * i + 0] = s[i][0] + s[i][1] + s[i][2];
        out[3 * i + 1] = s[i][1] - s[i][2];
        out[3 * i + 2] = s[i][1] + s[i][2] + s[i][3];
      }
    }
  }
}

class WinogradConv2d : public Conv2dOp {
 public:
  WinogradConv2d(const Conv2dShape& shape, OneDnnContext* context,
                 ThreadPool* pool)
      : shape_(shape), context_(context), pool_(pool) {
    tiles_.batch = shape.batch;
    tiles_.height = shape.height;
    tiles_.width = shape.width;
    tiles_.rows = (shape.height + 1) / 2;
    tiles_.cols = (shape.width + 1) / 2;
    const int64_t per_tile = kElements *
                             (shape.in_channels + shape.out_channels) *
                             static_cast<int64_t>(sizeof(float));
    chunk_tiles_ = std::clamp(kChunkBudget / per_tile / kRows * kRows, kRows,
                              kMaxChunkTiles);
    chunk_tiles_ = std::min(chunk_tiles_, RoundUp(tiles_.count(), kRows));
    // What each call takes: U, then each thread's V and M; each thread's
    // part of the filter gradient.
    context_->workspace.Reserve(OneDnnWorkspace::CallBytes(
        {FilterBytes(), SlotBytes() * pool_->num_threads()}));
    context_->workspace.Reserve(
        OneDnnWorkspace::CallBytes({FilterSlotBytes() * pool_->num_threads()}));
  }

  const Conv2dShape& shape() const override { return shape_; }

 private:
  absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                         ConstDeviceView b, DeviceView y) override {
    return Run(x.data(), shape_.in_channels, w.data(), /*backward_data=*/false,
               shape_.has_bias ? b.data() : nullptr, shape_.relu, y.data(),
               shape_.out_channels, "forward");
  }

  absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                              DeviceView dx) override {
    return Run(dy.data(), shape_.out_channels, w.data(),
               /*backward_data=*/true, nullptr, false, dx.data(),
               shape_.in_channels, "backward data");
  }

  absl::Status DoBackwardFilter(ConstDeviceView x, ConstDeviceView dy,
                                DeviceView dw, DeviceView db) override {
    return CatchOneDnn(
        absl::StrCat(shape_.ToString(), " winograd backward filter"), [&] {
          CallSpace space(&context_->workspace);
          const int slots = pool_->num_threads();
          char* slot_space = space.Take(FilterSlotBytes() * slots);
          RunFilter(x.data(), dy.data(), slots, slot_space,
                    shape_.has_bias ? db.data() : nullptr, dw.data());
        });
  }

  size_t FilterBytes() const {
    return kElements * shape_.in_channels * shape_.out_channels * sizeof(float);
  }
  // One thread's part of the filter gradient: X and DY of a chunk, its W
  // ([kElements][out][in]) and dy's sums (float per chunk, double in all).
  size_t FilterSlotBytes() const {
    const int64_t ins = shape_.in_channels, outs = shape_.out_channels;
    return OneDnnWorkspace::Aligned(kElements * chunk_tiles_ * (ins + outs) *
                                    sizeof(float)) +
           OneDnnWorkspace::Aligned(kElements * ins * outs * sizeof(float)) +
           OneDnnWorkspace::Aligned(outs * sizeof(float)) +
           OneDnnWorkspace::Aligned(outs * sizeof(double));
  }

  void RunFilter(const float* x, const float* dy, int slots, char* slot_space,
                 float* db, float* dw) {
    const int64_t ins = shape_.in_channels, outs = shape_.out_channels;
    Pass px;
    px.in = x;
    px.in_channels = ins;
    px.tiles = tiles_;
    px.chunk_tiles = chunk_tiles_;
    Pass pdy = px;
    pdy.in = dy;
    pdy.in_channels = outs;
    const int64_t count = tiles_.count();
    const int64_t chunks = (count + chunk_tiles_ - 1) / chunk_tiles_;
    const int64_t w_floats = kElements * ins * outs;
    struct Slot {
      float* v;
      float* g;
      float* w;
      float* chunk_sum;
      double* sum;
    };
    auto slot_at = [&](int64_t s) {
      char* base = slot_space + s * FilterSlotBytes();
      Slot slot;
      slot.v = reinterpret_cast<float*>(base);
      slot.g = slot.v + kElements * chunk_tiles_ * ins;
      base += OneDnnWorkspace::Aligned(kElements * chunk_tiles_ * (ins + outs) *
                                       sizeof(float));
      slot.w = reinterpret_cast<float*>(base);
      base += OneDnnWorkspace::Aligned(w_floats * sizeof(float));
      slot.chunk_sum = reinterpret_cast<float*>(base);
      base += OneDnnWorkspace::Aligned(outs * sizeof(float));
      slot.sum = reinterpret_cast<double*>(base);
      return slot;
    };
    pool_->ParallelFor(slots, 1, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        const Slot slot = slot_at(s);
        std::fill(slot.w, slot.w + w_floats, 0.0f);
        std::fill(slot.sum, slot.sum + outs, 0.0);
        for (int64_t c = s; c < chunks; c += slots) {
          const int64_t t0 = c * chunk_tiles_;
          std::fill(slot.chunk_sum, slot.chunk_sum + outs, 0.0f);
          RunFilterChunk(px, pdy, t0, std::min(count, t0 + chunk_tiles_),
                         slot.v, slot.g, slot.w, slot.chunk_sum);
          for (int64_t o = 0; o < outs; ++o) slot.sum[o] += slot.chunk_sum[o];
        }
      }
    });
    // The threads' sums into the first's, then back from the transformed
    // domain.
    float* w = slot_at(0).w;
    pool_->ParallelFor(w_floats, 4096, [&](int64_t begin, int64_t end) {
      for (int s = 1; s < slots; ++s) {
        const float* other = slot_at(s).w;
        for (int64_t i = begin; i < end; ++i) w[i] += other[i];
      }
    });
    pool_->ParallelFor(outs, 1, [&](int64_t begin, int64_t end) {
      FilterOutput(w, outs, ins, begin, end, dw);
    });
    if (db != nullptr) {
      for (int64_t o = 0; o < outs; ++o) {
        double total = 0.0;
        for (int s = 0; s < slots; ++s) total += slot_at(s).sum[o];
        db[o] = static_cast<float>(total);
      }
    }
  }

  // One thread's V and M.
  size_t SlotBytes() const {
    return OneDnnWorkspace::Aligned(kElements * chunk_tiles_ *
                                    (shape_.in_channels + shape_.out_channels) *
                                    sizeof(float));
  }

  absl::Status Run(const float* in, int64_t ins, const float* w,
                   bool backward_data, const float* bias, bool relu, float* out,
                   int64_t outs, absl::string_view what) {
    return CatchOneDnn(
        absl::StrCat(shape_.ToString(), " winograd ", what), [&] {
          CallSpace space(&context_->workspace);
          float* u = reinterpret_cast<float*>(space.Take(FilterBytes()));
          const int slots = pool_->num_threads();
          char* slot_space = space.Take(SlotBytes() * slots);
          TransformFilters(w, ins, outs, backward_data, u, pool_);
          Pass p;
          p.in = in;
          p.in_channels = ins;
          p.u = u;
          p.out_channels = outs;
          p.bias = bias;
          p.relu = relu;
          p.out = out;
          p.tiles = tiles_;
          p.chunk_tiles = chunk_tiles_;
          RunTiles(p, slots, slot_space);
        });
  }

  void RunTiles(const Pass& p, int slots, char* slot_space) {
    const int64_t count = p.tiles.count();
    const int64_t chunks = (count + p.chunk_tiles - 1) / p.chunk_tiles;
    pool_->ParallelFor(slots, 1, [&](int64_t begin, int64_t end) {
      for (int64_t slot = begin; slot < end; ++slot) {
        float* v = reinterpret_cast<float*>(slot_space + slot * SlotBytes());
        float* m = v + kElements * p.chunk_tiles * p.in_channels;
        for (int64_t c = slot; c < chunks; c += slots) {
          const int64_t t0 = c * p.chunk_tiles;
          RunChunk(p, t0, std::min(count, t0 + p.chunk_tiles), v, m);
        }
      }
    });
  }

  const Conv2dShape shape_;
  OneDnnContext* const context_;  // Not owned.
  ThreadPool* const pool_;        // Not owned.
  Tiles tiles_;
  int64_t chunk_tiles_ = 0;
};

}  // namespace

bool WinogradConv2dApplies(const Conv2dShape& shape) {
  return Refusal(shape).empty();
}

absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateWinogradConv2d(
    const Conv2dShape& shape, OneDnnContext* context, ThreadPool* pool) {
  RETURN_IF_ERROR(shape.Validate());
  std::string refusal = Refusal(shape);
  if (refusal.empty() && context->bf16) refusal = "it computes in bfloat16";
  if (!refusal.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(shape.ToString(), ": no Winograd F(2x2, 3x3): ", refusal));
  }
  return std::unique_ptr<Conv2dOp>(
      std::make_unique<WinogradConv2d>(shape, context, pool));
}

}  // namespace psgd
