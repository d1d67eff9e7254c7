// Softmax cross-entropy averaged over the batch, on the CPU.
//
// Thread-safety: a pure function over caller-owned memory.
#ifndef PSGD_WORKER_CPU_SOFTMAX_XENT_H_
#define PSGD_WORKER_CPU_SOFTMAX_XENT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "worker/backend/backend.h"

namespace psgd {

// logits: (N, K); labels: (N) in [0, K) (SoftmaxCrossEntropyOp::Run
// checks them)  ->  dlogits: (N, K) = (softmax(logits) - one_hot(labels)) /
// N, the mean loss and the number of correct predictions.
CrossEntropyResult SoftmaxCrossEntropyKernel(int64_t batch, int64_t classes,
                                             const float* logits,
                                             absl::Span<const int32_t> labels,
                                             float* dlogits);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_SOFTMAX_XENT_H_
