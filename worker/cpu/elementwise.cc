#include "worker/cpu/elementwise.h"

#include <algorithm>
#include <vector>

namespace psgd {
namespace {

// Enough work per thread to be worth a wake-up.
constexpr int64_t kMinChunk = 1 << 15;

}  // namespace

void ReluForwardKernel(int64_t n, const float* x, float* y, ThreadPool* pool) {
  pool->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = std::max(x[i], 0.0f);
  });
}

void ReluBackwardKernel(int64_t n, const float* y, const float* dy, float* dx,
                        ThreadPool* pool) {
  pool->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end) {
    // dy loaded unconditionally, so that the select is a blend the compiler
    // vectorises, not a branch on the sign of each element (a branch
    // mispredicted on half of them made this 12x the forward).
    for (int64_t i = begin; i < end; ++i) {
      const float g = dy[i];
      dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
  });
}

void AddKernel(int64_t n, const float* a, const float* b, float* y,
               ThreadPool* pool) {
  pool->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = a[i] + b[i];
  });
}

void AddReluKernel(int64_t n, const float* a, const float* b, float* y,
                   ThreadPool* pool) {
  pool->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = std::max(a[i] + b[i], 0.0f);
  });
}

void GlobalAvgPoolForwardKernel(int64_t rows, int64_t inner, int64_t block,
                                const float* x, float* y, ThreadPool* pool) {
  const float scale = 1.0f / static_cast<float>(inner);
  const int64_t lanes = block > 0 ? block : 1;  // NCHW: one channel a plane
  pool->ParallelFor(rows / lanes,
                    std::max<int64_t>(kMinChunk / (inner * lanes), 1),
                    [&](int64_t begin, int64_t end) {
                      std::vector<float> sum(lanes);
                      for (int64_t p = begin; p < end; ++p) {
                        const float* plane = x + p * inner * lanes;
                        std::fill(sum.begin(), sum.end(), 0.0f);
                        for (int64_t i = 0; i < inner; ++i) {
                          for (int64_t l = 0; l < lanes; ++l)
                            sum[l] += plane[i * lanes + l];
                        }
                        for (int64_t l = 0; l < lanes; ++l) {
                          y[p * lanes + l] = sum[l] * scale;
                        }
                      }
                    });
}

void GlobalAvgPoolBackwardKernel(int64_t rows, int64_t inner, int64_t block,
                                 const float* dy, float* dx, ThreadPool* pool) {
  const float scale = 1.0f / static_cast<float>(inner);
  const int64_t lanes = block > 0 ? block : 1;  // NCHW: one channel a plane
  pool->ParallelFor(rows / lanes,
                    std::max<int64_t>(kMinChunk / (inner * lanes), 1),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t p = begin; p < end; ++p) {
                        float* plane = dx + p * inner * lanes;
                        for (int64_t i = 0; i < inner; ++i) {
                          for (int64_t l = 0; l < lanes; ++l) {
                            plane[i * lanes + l] = dy[p * lanes + l] * scale;
                          }
                        }
                      }
                    });
}

void BiasAddKernel(int64_t batch, int64_t channels, int64_t inner,
                   const float* b, float* y, ThreadPool* pool) {
  const int64_t rows = batch * channels;
  pool->ParallelFor(rows, std::max<int64_t>(kMinChunk / inner, 1),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        const float bias = b[r % channels];
                        float* row = y + r * inner;
                        for (int64_t i = 0; i < inner; ++i) row[i] += bias;
                      }
                    });
}

void BiasGradKernel(int64_t batch, int64_t channels, int64_t inner,
                    const float* dy, float* db, ThreadPool* pool) {
  // Each thread sums a range of channels over the whole batch, in double so
  // that large batches keep float precision.
  pool->ParallelFor(channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      double sum = 0.0;
      for (int64_t n = 0; n < batch; ++n) {
        const float* row = dy + (n * channels + c) * inner;
        float partial = 0.0f;
        for (int64_t i = 0; i < inner; ++i) partial += row[i];
        sum += partial;
      }
      db[c] = static_cast<float>(sum);
    }
  });
}

double L2WeightDecayKernel(int64_t n, const float* w, float decay, float* dw) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(w[i]) * w[i];
    dw[i] += decay * w[i];
  }
  return decay * sum / 2.0;
}

}  // namespace psgd
