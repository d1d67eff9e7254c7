// Convolution through oneDNN's direct (JIT, AVX-512 / AVX2) kernels, the CPU
// backend's default. The plan holds the three primitives (forward, backward
// data, backward weights), their scratchpads and the blocked-layout buffers
// with the reorders from and to NCHW / OIHW, all made once per shape.
//
// Thread-safety: as Conv2dOp (one thread at a time).
#ifndef PSGD_WORKER_CPU_CONV_ONEDNN_H_
#define PSGD_WORKER_CPU_CONV_ONEDNN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/cpu/onednn_util.h"

namespace psgd {

// INVALID_ARGUMENT for an invalid shape; INTERNAL if oneDNN has no kernel.
// `context` is not owned and must outlive the op.
absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateOneDnnConv2d(
    const Conv2dShape& shape, OneDnnContext* context);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_CONV_ONEDNN_H_
