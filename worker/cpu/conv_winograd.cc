#include "worker/cpu/conv_winograd.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

// Elements of a transformed 4x4 tile (e = 4 i + j).
constexpr int64_t kElements = 16;
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
  if (shape.in_block != shape.out_block ||
      (shape.in_block != 16 && shape.in_block != 8)) {
    return "the activations are not in 16- or 8-channel blocks on both sides";
  }
  if (shape.in_block == 16 && !__builtin_cpu_supports("avx512f")) {
    return "16-channel blocks need AVX-512, which the CPU lacks";
  }
  if (shape.in_block == 8 &&
      !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    return "8-channel blocks need AVX2 and FMA, which the CPU lacks";
  }
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
  int64_t chunk_tiles = 0;  // rows of V and M per chunk (a multiple of rows)
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

// The kernels for each instruction set (conv_winograd_kernels.inc): 16
// channels per AVX-512 register, 8 per AVX2 one. AVX2 has 16 registers, so
// its matrix product takes 6 tiles a step (12 sums, 2 of the filters' row,
// 1 broadcast) where AVX-512's 32 take 8.
namespace avx512 {
using V = __m512;
constexpr int64_t kLanes = 16;
constexpr int64_t kRows = 8;
#define PSGD_WINOGRAD_KERNEL __attribute__((target("avx512f")))
#define PSGD_WINOGRAD_OP __attribute__((target("avx512f"), always_inline))
#define PSGD_WINOGRAD_INLINE PSGD_WINOGRAD_OP inline
PSGD_WINOGRAD_OP inline V Zero() { return _mm512_setzero_ps(); }
PSGD_WINOGRAD_OP inline V Set1(float x) { return _mm512_set1_ps(x); }
PSGD_WINOGRAD_OP inline V Load(const float* p) { return _mm512_loadu_ps(p); }
PSGD_WINOGRAD_OP inline void Store(float* p, V x) { _mm512_storeu_ps(p, x); }
PSGD_WINOGRAD_OP inline V Add(V a, V b) { return _mm512_add_ps(a, b); }
PSGD_WINOGRAD_OP inline V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
PSGD_WINOGRAD_OP inline V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
PSGD_WINOGRAD_OP inline V Fma(V a, V b, V c) {
  return _mm512_fmadd_ps(a, b, c);
}
// (The masked form: GCC 12 warns that _mm512_max_ps's placeholder source
// may be uninitialised.)
PSGD_WINOGRAD_OP inline V MaxZero(V y, V zero) {
  return _mm512_mask_max_ps(y, 0xFFFF, y, zero);
}
#include "worker/cpu/conv_winograd_kernels.inc"
#undef PSGD_WINOGRAD_INLINE
#undef PSGD_WINOGRAD_OP
#undef PSGD_WINOGRAD_KERNEL
}  // namespace avx512

namespace avx2 {
using V = __m256;
constexpr int64_t kLanes = 8;
constexpr int64_t kRows = 6;
#define PSGD_WINOGRAD_KERNEL __attribute__((target("avx2,fma")))
#define PSGD_WINOGRAD_OP __attribute__((target("avx2,fma"), always_inline))
#define PSGD_WINOGRAD_INLINE PSGD_WINOGRAD_OP inline
PSGD_WINOGRAD_OP inline V Zero() { return _mm256_setzero_ps(); }
PSGD_WINOGRAD_OP inline V Set1(float x) { return _mm256_set1_ps(x); }
PSGD_WINOGRAD_OP inline V Load(const float* p) { return _mm256_loadu_ps(p); }
PSGD_WINOGRAD_OP inline void Store(float* p, V x) { _mm256_storeu_ps(p, x); }
PSGD_WINOGRAD_OP inline V Add(V a, V b) { return _mm256_add_ps(a, b); }
PSGD_WINOGRAD_OP inline V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
PSGD_WINOGRAD_OP inline V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
PSGD_WINOGRAD_OP inline V Fma(V a, V b, V c) {
  return _mm256_fmadd_ps(a, b, c);
}
PSGD_WINOGRAD_OP inline V MaxZero(V y, V zero) {
  return _mm256_max_ps(y, zero);
}
#include "worker/cpu/conv_winograd_kernels.inc"
#undef PSGD_WINOGRAD_INLINE
#undef PSGD_WINOGRAD_OP
#undef PSGD_WINOGRAD_KERNEL
}  // namespace avx2

// One instruction set's kernels, and how they cut the tiles.
struct Kernels {
  int64_t lanes = 0;  // the activations' channel block
  int64_t rows = 0;   // chunks of tiles are multiples of it
  // The bytes of V and M one chunk of tiles may take: most of the L2 cache.
  int64_t chunk_budget = 0;
  void (*run_chunk)(const Pass& p, int64_t t0, int64_t t1, float* v,
                    float* m) = nullptr;
  void (*run_filter_chunk)(const Pass& x, const Pass& dy, int64_t t0,
                           int64_t t1, float* v, float* g, float* w,
                           float* bias_sum) = nullptr;
};

// Three quarters of this core's L2 cache (`fallback` bytes where the
// system does not say).
int64_t L2Budget(int64_t fallback) {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<int64_t>(l2) / 4 * 3 : fallback;
}

// The kernels for `block`-channel blocks (16: AVX-512, 8: AVX2), which
// Refusal has checked.
Kernels KernelsFor(int64_t block) {
  Kernels k;
  if (block == 16) {
    k.lanes = avx512::kLanes;
    k.rows = avx512::kRows;
    k.chunk_budget = 768 * 1024;  // measured on a 1 MB L2
    k.run_chunk = &avx512::RunChunk;
    k.run_filter_chunk = &avx512::RunFilterChunk;
  } else {
    k.lanes = avx2::kLanes;
    k.rows = avx2::kRows;
    k.chunk_budget = L2Budget(384 * 1024);
    k.run_chunk = &avx2::RunChunk;
    k.run_filter_chunk = &avx2::RunFilterChunk;
  }
  return k;
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
      : shape_(shape),
        context_(context),
        pool_(pool),
        kernels_(KernelsFor(shape.in_block)) {
    const int64_t rows = kernels_.rows;
    tiles_.batch = shape.batch;
    tiles_.height = shape.height;
    tiles_.width = shape.width;
    tiles_.rows = (shape.height + 1) / 2;
    tiles_.cols = (shape.width + 1) / 2;
    const int64_t per_tile = kElements *
                             (shape.in_channels + shape.out_channels) *
                             static_cast<int64_t>(sizeof(float));
    chunk_tiles_ = std::clamp(kernels_.chunk_budget / per_tile / rows * rows,
                              rows, kMaxChunkTiles / rows * rows);
    chunk_tiles_ = std::min(chunk_tiles_, RoundUp(tiles_.count(), rows));
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
          kernels_.run_filter_chunk(px, pdy, t0,
                                    std::min(count, t0 + chunk_tiles_), slot.v,
                                    slot.g, slot.w, slot.chunk_sum);
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
          kernels_.run_chunk(p, t0, std::min(count, t0 + p.chunk_tiles), v, m);
        }
      }
    });
  }

  const Conv2dShape shape_;
  OneDnnContext* const context_;  // Not owned.
  ThreadPool* const pool_;        // Not owned.
  const Kernels kernels_;
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
  const std::string refusal = Refusal(shape);
  if (!refusal.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(shape.ToString(), ": no Winograd F(2x2, 3x3): ", refusal));
  }
  return std::unique_ptr<Conv2dOp>(
      std::make_unique<WinogradConv2d>(shape, context, pool));
}

}  // namespace psgd
