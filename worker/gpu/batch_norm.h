// Batch normalisation on the GPU, this folder's kernels (CPU reference:
// worker/cpu/batch_norm_onednn.cc, the same formulas): the batch statistics
// summed in float64 per channel (as the CPU op, so that a fused ReLU's
// mask agrees), PyTorch's running-statistics update (momentum, unbiased
// variance), the normalisation with an optional fused ReLU, and the
// backward (the ReLU's mask from y, then the normalisation's gradient with
// dgamma and dbeta summed in float64).
//
// x, y, dy, dx: (N, C, plane) device memory; gamma, beta, mean, var, the
// running statistics, dgamma, dbeta: (C). Launchers enqueue on `stream` and
// return the launch status.
//
// Thread-safety: launchers may be called from any thread.
#ifndef PSGD_WORKER_GPU_BATCH_NORM_H_
#define PSGD_WORKER_GPU_BATCH_NORM_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"

namespace psgd::gpu {

struct BatchNormGeometry {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t plane = 0;  // H * W
  float epsilon = 1e-5f;
  bool relu = false;
};

// mean, var: the batch's mean and biased variance of each channel; then
// running = (1 - momentum) * running + momentum * statistic, the variance
// taken unbiased (x M / (M - 1), M = N * plane).
absl::Status LaunchBatchNormStatistics(const BatchNormGeometry& g,
                                       const float* x, float momentum,
                                       float* mean, float* var,
                                       float* running_mean, float* running_var,
                                       cudaStream_t stream);

// y = gamma * (x - mean) / sqrt(var + epsilon) + beta, then max(y, 0) with
// relu. Training passes the batch's statistics, inference the running
// ones.
absl::Status LaunchBatchNormForward(const BatchNormGeometry& g, const float* x,
                                    const float* gamma, const float* beta,
                                    const float* mean, const float* var,
                                    float* y, cudaStream_t stream);

// The backward of a training forward: with relu, dy where y > 0 (else 0)
// is the normalisation's output gradient. dbeta = sum(g), dgamma =
// sum(g * xhat) (float64 sums), dx = gamma / sqrt(var + eps) * (g -
// dbeta / M - xhat * dgamma / M). dx may be dy. y is read only with relu.
absl::Status LaunchBatchNormBackward(const BatchNormGeometry& g, const float* x,
                                     const float* y, const float* dy,
                                     const float* gamma, const float* mean,
                                     const float* var, float* dx, float* dgamma,
                                     float* dbeta, cudaStream_t stream);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_BATCH_NORM_H_
