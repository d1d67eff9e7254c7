// Softmax cross-entropy kernels of the GPU backend: per-row loss, gradient
// and correctness in one pass (one warp per row, float64 for the softmax
// sum and the log, as the CPU does), then a one-block reduction to the batch
// totals, so that only 16 bytes go back to the host.
//
// CPU reference: worker/cpu/softmax_xent.h. Launchers enqueue on `stream`
// and return the launch status; pointers are device memory. Labels must be
// in [0, K) (the backend checks them on the host first).
//
// Thread-safety: launchers may be called from any thread.
#ifndef PSGD_WORKER_GPU_SOFTMAX_XENT_H_
#define PSGD_WORKER_GPU_SOFTMAX_XENT_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"

namespace psgd::gpu {

// What the reduction writes: the sum over the batch of -log softmax[label]
// and the number of rows predicted right.
struct CrossEntropyTotals {
  double loss_sum;
  long long correct;
};

// logits: (N, K); labels: (N) in [0, K)  ->  dlogits: (N, K) =
// (softmax(logits) - one_hot(labels)) / N; row_loss: (N); row_correct: (N)
// 1 where no logit is strictly larger than the label's (and it is not NaN).
absl::Status LaunchSoftmaxCrossEntropy(int64_t batch, int64_t classes,
                                       const float* logits,
                                       const int32_t* labels, float* dlogits,
                                       double* row_loss, int* row_correct,
                                       cudaStream_t stream);

// row_loss, row_correct: (N)  ->  *totals.
absl::Status LaunchCrossEntropyTotals(int64_t batch, const double* row_loss,
                                      const int* row_correct,
                                      CrossEntropyTotals* totals,
                                      cudaStream_t stream);

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_SOFTMAX_XENT_H_
