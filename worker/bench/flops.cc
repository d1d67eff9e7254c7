#include "worker/bench/flops.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace psgd {
namespace {

// 2 * multiply-adds of a layer.
double Conv(double c, double hw, double o, double k) {
  return 2 * c * hw * o * k * k;
}
double Dense(double in, double out) { return 2 * in * out; }

constexpr int kChains = 12;  // enough independent FMAs to hide the latency

__attribute__((target("avx512f"))) double FmaAvx512(int64_t iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(1.0f + k * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    // Unrolled, so that the accumulators stay in registers.
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx2,fma"))) double FmaAvx2(int64_t iters) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(1.0f + k * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  float out[8];
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  _mm256_storeu_ps(out, s);
  return out[0];
}

double MulAddSse(int64_t iters) {
  __m128 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm_set1_ps(1.0f + k * 1e-3f);
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k)
      acc[k] = _mm_add_ps(_mm_mul_ps(acc[k], a), b);
  }
  return _mm_cvtss_f32(acc[0]);
}

}  // namespace

double TutorialTrainingFlopsPerImage() {
  const double conv1 = Conv(3, 24 * 24, 64, 5);   // forward; + filter grad
  const double conv2 = Conv(64, 12 * 12, 64, 5);  // forward; + data, filter
  const double dense = Dense(2304, 384) + Dense(384, 192) + Dense(192, 10);
  return 2 * conv1 + 3 * conv2 + 3 * dense;
}

double TutorialTrainingFlopsPerImageWithInputGradient() {
  return TutorialTrainingFlopsPerImage() + Conv(3, 24 * 24, 64, 5);
}

LayerFlops NetworkLayerFlopsPerImage(const NetworkSpec& spec, int layer) {
  const Layer& l = spec.layers[layer];
  LayerFlops f;
  if (l.kind != LayerKind::kConv && l.kind != LayerKind::kDense) return f;
  const Shape& in = spec.layers[l.inputs[0]].shape;
  if (l.kind == LayerKind::kConv) {
    // (O, OH, OW) outputs, each C * K * K multiply-adds.
    f.forward = 2.0 * NumElements(l.shape) * in[0] * l.kernel * l.kernel;
  } else {
    f.forward = Dense(NumElements(in), NumElements(l.shape));
  }
  const bool input_gradient = l.inputs[0] != 0;
  f.backward = f.forward * (input_gradient ? 2 : 1);
  return f;
}

double NetworkTrainingFlopsPerImage(const NetworkSpec& spec) {
  double total = 0.0;
  for (int i = 0; i < static_cast<int>(spec.layers.size()); ++i) {
    const LayerFlops f = NetworkLayerFlopsPerImage(spec, i);
    total += f.forward + f.backward;
  }
  return total;
}

PeakResult MeasurePeakGflops(int threads, double seconds) {
  PeakResult result;
  int lanes;
  double (*kernel)(int64_t);
  if (__builtin_cpu_supports("avx512f")) {
    kernel = &FmaAvx512;
    lanes = 16;
    result.isa = "avx512f";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    kernel = &FmaAvx2;
    lanes = 8;
    result.isa = "avx2+fma";
  } else {
    kernel = &MulAddSse;
    lanes = 4;
    result.isa = "sse2";
  }
  // Calibrate on one thread, then run all threads for about `seconds`.
  int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile double sink = kernel(iters);
    (void)sink;
    const double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (dt > seconds / 20 || iters > (int64_t{1} << 40)) {
      iters = static_cast<int64_t>(iters * seconds / 5 / dt);
      break;
    }
    iters *= 4;
  }
  // Best of five runs: another process taking a core for a moment lowers
  // one run, not the peak.
  for (int trial = 0; trial < 5; ++trial) {
    std::atomic<double> total_rate{0.0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        const auto t0 = std::chrono::steady_clock::now();
        volatile double sink = kernel(iters);
        (void)sink;
        const double dt =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
        const double rate =
            static_cast<double>(iters) * kChains * lanes * 2 / dt;
        double seen = total_rate.load();
        while (!total_rate.compare_exchange_weak(seen, seen + rate)) {
        }
      });
    }
    for (std::thread& w : workers) w.join();
    result.gflops = std::max(result.gflops, total_rate.load() / 1e9);
  }
  return result;
}

}  // namespace psgd
