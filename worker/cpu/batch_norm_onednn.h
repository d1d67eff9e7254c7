// Batch normalisation through oneDNN's batch_normalization primitives, as
// oneDNN's examples/primitives/batch_normalization.cpp: one forward-training,
// one forward-inference and one backward primitive per shape, made once, on
// the backend's plain NCHW layout (no reorders). The ReLU of a conv block
// runs in the same op, as a pass over y after the primitive (oneDNN's
// fuse_norm_relu was 4.5x slower on this layout); the backward masks dy
// with y's zeros and runs the plain backward in place. The batch
// statistics are summed in double here (as PyTorch's CPU batch norm; oneDNN
// sums in float32) and handed to the training primitive as given
// statistics; the running statistics' update (momentum, unbiased variance)
// is this file's loop over the channels.
//
// Thread-safety: as BatchNormOp (one thread at a time).
#ifndef PSGD_WORKER_CPU_BATCH_NORM_ONEDNN_H_
#define PSGD_WORKER_CPU_BATCH_NORM_ONEDNN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "worker/backend/backend.h"
#include "worker/cpu/onednn_util.h"

namespace psgd {

// INVALID_ARGUMENT for an invalid shape; INTERNAL if oneDNN has no kernel.
// `context` and `pool` are not owned and must outlive the op.
absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateOneDnnBatchNorm(
    const BatchNormShape& shape, OneDnnContext* context, ThreadPool* pool);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_BATCH_NORM_ONEDNN_H_
