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

// What the primitive's multiply-adds read. kBfloat16 (a CPU with AVX-512
// BF16; OneDnnHasBf16): each call rounds what the primitive reads (x and w;
// dy and w; x and dy) to bfloat16 and it accumulates and writes float32 (y;
// dx; dw and db), so the caller's tensors are float32 either way.
enum class ConvCompute { kFloat32, kBfloat16 };

// INVALID_ARGUMENT for an invalid shape; INTERNAL if oneDNN has no kernel.
// `context` is not owned and must outlive the op.
absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateOneDnnConv2d(
    const Conv2dShape& shape, OneDnnContext* context,
    ConvCompute compute = ConvCompute::kFloat32);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_CONV_ONEDNN_H_
