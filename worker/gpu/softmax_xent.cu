#include <algorithm>

#include "worker/gpu/cuda_status.h"
#include "worker/gpu/kernel_util.h"
#include "worker/gpu/softmax_xent.h"

namespace psgd::gpu {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr int kTotalsThreads = 256;

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// One warp per row of logits: (N, K).
__global__ void SoftmaxCrossEntropyKernel(int64_t batch, int64_t classes,
                                          const float* __restrict__ logits,
                                          const int32_t* __restrict__ labels,
                                          float* __restrict__ dlogits,
                                          double* __restrict__ row_loss,
                                          int* __restrict__ row_correct) {
  const int64_t row =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= batch) return;  // the whole warp leaves together
  const float* x = logits + row * classes;
  float* grad = dlogits + row * classes;
  const int32_t label = labels[row];

  float max = -INFINITY;
  for (int64_t j = lane; j < classes; j += kWarpSize) max = fmaxf(max, x[j]);
  max = WarpMax(max);
  double sum = 0.0;
  for (int64_t j = lane; j < classes; j += kWarpSize) {
    sum += exp(static_cast<double>(x[j]) - max);
  }
  sum = WarpSum(sum);
  const double log_sum = log(sum);
  const float label_logit = x[label];
  bool beaten = false;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int64_t j = lane; j < classes; j += kWarpSize) {
    const double p = exp(static_cast<double>(x[j]) - max - log_sum);
    grad[j] = static_cast<float>(p - (j == label ? 1.0 : 0.0)) * inv_batch;
    beaten = beaten || x[j] > label_logit;
  }
  beaten = __any_sync(0xffffffffu, beaten);
  if (lane == 0) {
    row_loss[row] = log_sum + max - label_logit;
    row_correct[row] = (!beaten && !isnan(label_logit)) ? 1 : 0;
  }
}

// row_loss, row_correct: (N) -> *totals. One block.
__global__ void CrossEntropyTotalsKernel(
    int64_t batch, const double* __restrict__ row_loss,
    const int* __restrict__ row_correct,
    CrossEntropyTotals* __restrict__ totals) {
  double loss = 0.0;
  long long correct = 0;
  for (int64_t i = threadIdx.x; i < batch; i += blockDim.x) {
    loss += row_loss[i];
    correct += row_correct[i];
  }
  loss = BlockSum(loss);
  correct = BlockSum(correct);
  if (threadIdx.x == 0) {
    totals->loss_sum = loss;
    totals->correct = correct;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------

absl::Status LaunchSoftmaxCrossEntropy(int64_t batch, int64_t classes,
                                       const float* logits,
                                       const int32_t* labels, float* dlogits,
                                       double* row_loss, int* row_correct,
                                       cudaStream_t stream) {
  const int64_t blocks = (batch + kRowsPerBlock - 1) / kRowsPerBlock;
  SoftmaxCrossEntropyKernel<<<static_cast<unsigned>(blocks),
                              kRowsPerBlock * kWarpSize, 0, stream>>>(
      batch, classes, logits, labels, dlogits, row_loss, row_correct);
  return KernelLaunchStatus("SoftmaxCrossEntropyKernel");
}

absl::Status LaunchCrossEntropyTotals(int64_t batch, const double* row_loss,
                                      const int* row_correct,
                                      CrossEntropyTotals* totals,
                                      cudaStream_t stream) {
  CrossEntropyTotalsKernel<<<1, kTotalsThreads, 0, stream>>>(
      batch, row_loss, row_correct, totals);
  return KernelLaunchStatus("CrossEntropyTotalsKernel");
}

}  // namespace psgd::gpu
