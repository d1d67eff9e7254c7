#include "worker/gpu/batch_norm.h"
#include "worker/gpu/cuda_status.h"
#include "worker/gpu/kernel_util.h"

namespace psgd::gpu {
namespace {

// Threads of the per-channel reductions: one block per channel, so as many
// threads as a block may have (a ResNet's first stage has 16 channels, 16
// blocks for the whole GPU).
constexpr int kChannelThreads = 1024;

// One block per channel c: the mean, then the sum of squared deviations
// (two passes over the channel's N * plane values, in float64). Each image's
// plane is contiguous: the threads stride over it, image by image (no
// division per element; 64-bit division cost more than the sums).
__global__ void __launch_bounds__(kChannelThreads)
    StatisticsKernel(int64_t batch, int64_t channels, int64_t plane,
                     const float* __restrict__ x, float momentum,
                     float* __restrict__ mean, float* __restrict__ var,
                     float* __restrict__ running_mean,
                     float* __restrict__ running_var) {
  const int64_t c = blockIdx.x;
  const int64_t m = batch * plane;
  __shared__ double mu_shared;
  double sum = 0.0;
  for (int64_t n = 0; n < batch; ++n) {
    const float* xc = x + (n * channels + c) * plane;
    for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) sum += xc[i];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) mu_shared = sum / static_cast<double>(m);
  __syncthreads();
  const double mu = mu_shared;
  double sq = 0.0;
  for (int64_t n = 0; n < batch; ++n) {
    const float* xc = x + (n * channels + c) * plane;
    for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) {
      const double d = xc[i] - mu;
      sq += d * d;
    }
  }
  sq = BlockSum(sq);
  if (threadIdx.x != 0) return;
  const float batch_mean = static_cast<float>(mu);
  const float batch_var = static_cast<float>(sq / static_cast<double>(m));
  mean[c] = batch_mean;
  var[c] = batch_var;
  const float unbias =
      m > 1 ? static_cast<float>(m) / static_cast<float>(m - 1) : 1.0f;
  running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * batch_mean;
  running_var[c] =
      (1.0f - momentum) * running_var[c] + momentum * unbias * batch_var;
}

template <typename I>
__global__ void ForwardKernel(I total, I channels, I plane, float epsilon,
                              bool relu, const float* __restrict__ x,
                              const float* __restrict__ gamma,
                              const float* __restrict__ beta,
                              const float* __restrict__ mean,
                              const float* __restrict__ var,
                              float* __restrict__ y) {
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    const I c = (i / plane) % channels;
    const float v =
        gamma[c] * (x[i] - mean[c]) * rsqrtf(var[c] + epsilon) + beta[c];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

// One block per channel: dbeta = sum(g), dgamma = sum(g * xhat).
__global__ void __launch_bounds__(kChannelThreads)
    BackwardSumsKernel(int64_t batch, int64_t channels, int64_t plane,
                       float epsilon, bool relu, const float* __restrict__ x,
                       const float* __restrict__ y,
                       const float* __restrict__ dy,
                       const float* __restrict__ mean,
                       const float* __restrict__ var,
                       float* __restrict__ dgamma, float* __restrict__ dbeta) {
  const int64_t c = blockIdx.x;
  const float mu = mean[c];
  const float inv = rsqrtf(var[c] + epsilon);
  double sum_g = 0.0, sum_gx = 0.0;
  for (int64_t n = 0; n < batch; ++n) {
    const int64_t base = (n * channels + c) * plane;
    for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) {
      const int64_t at = base + i;
      const float g = (relu && !(y[at] > 0.0f)) ? 0.0f : dy[at];
      sum_g += g;
      sum_gx += static_cast<double>(g) * ((x[at] - mu) * inv);
    }
  }
  sum_g = BlockSum(sum_g);
  sum_gx = BlockSum(sum_gx);
  if (threadIdx.x == 0) {
    dbeta[c] = static_cast<float>(sum_g);
    dgamma[c] = static_cast<float>(sum_gx);
  }
}

template <typename I>
__global__ void BackwardDataKernel(
    I total, I channels, I plane, float m, float epsilon, bool relu,
    const float* __restrict__ x, const float* __restrict__ y, const float* dy,
    const float* __restrict__ gamma, const float* __restrict__ mean,
    const float* __restrict__ var, const float* __restrict__ dgamma,
    const float* __restrict__ dbeta,
    float* dx) {  // dx may be dy
  for (I i = GridStart<I>(); i < total; i += GridStride<I>()) {
    const I c = (i / plane) % channels;
    const float inv = rsqrtf(var[c] + epsilon);
    const float g = (relu && !(y[i] > 0.0f)) ? 0.0f : dy[i];
    const float xhat = (x[i] - mean[c]) * inv;
    dx[i] = gamma[c] * inv * (g - dbeta[c] / m - xhat * dgamma[c] / m);
  }
}

}  // namespace

absl::Status LaunchBatchNormStatistics(const BatchNormGeometry& g,
                                       const float* x, float momentum,
                                       float* mean, float* var,
                                       float* running_mean, float* running_var,
                                       cudaStream_t stream) {
  StatisticsKernel<<<static_cast<unsigned>(g.channels), kChannelThreads, 0,
                     stream>>>(g.batch, g.channels, g.plane, x, momentum, mean,
                               var, running_mean, running_var);
  return KernelLaunchStatus("BatchNormStatisticsKernel");
}

absl::Status LaunchBatchNormForward(const BatchNormGeometry& g, const float* x,
                                    const float* gamma, const float* beta,
                                    const float* mean, const float* var,
                                    float* y, cudaStream_t stream) {
  const int64_t total = g.batch * g.channels * g.plane;
  if (FitsInt32(total)) {
    ForwardKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        static_cast<int>(total), static_cast<int>(g.channels),
        static_cast<int>(g.plane), g.epsilon, g.relu, x, gamma, beta, mean, var,
        y);
  } else {
    ForwardKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        total, g.channels, g.plane, g.epsilon, g.relu, x, gamma, beta, mean,
        var, y);
  }
  return KernelLaunchStatus("BatchNormForwardKernel");
}

absl::Status LaunchBatchNormBackward(const BatchNormGeometry& g, const float* x,
                                     const float* y, const float* dy,
                                     const float* gamma, const float* mean,
                                     const float* var, float* dx, float* dgamma,
                                     float* dbeta, cudaStream_t stream) {
  BackwardSumsKernel<<<static_cast<unsigned>(g.channels), kChannelThreads, 0,
                       stream>>>(g.batch, g.channels, g.plane, g.epsilon,
                                 g.relu, x, y, dy, mean, var, dgamma, dbeta);
  absl::Status s = KernelLaunchStatus("BatchNormBackwardSumsKernel");
  if (!s.ok()) return s;
  const int64_t total = g.batch * g.channels * g.plane;
  const float m = static_cast<float>(g.batch * g.plane);
  if (FitsInt32(total)) {
    BackwardDataKernel<int><<<BlocksFor(total), kThreads, 0, stream>>>(
        static_cast<int>(total), static_cast<int>(g.channels),
        static_cast<int>(g.plane), m, g.epsilon, g.relu, x, y, dy, gamma, mean,
        var, dgamma, dbeta, dx);
  } else {
    BackwardDataKernel<int64_t><<<BlocksFor(total), kThreads, 0, stream>>>(
        total, g.channels, g.plane, m, g.epsilon, g.relu, x, y, dy, gamma, mean,
        var, dgamma, dbeta, dx);
  }
  return KernelLaunchStatus("BatchNormBackwardDataKernel");
}

}  // namespace psgd::gpu
