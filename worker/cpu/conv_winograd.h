// Convolution by Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2016): each 2x2 block
// of outputs comes from a 4x4 block of inputs in 16 multiplications per
// channel pair instead of a direct convolution's 36, so 2.25x fewer
// multiply-adds, for transforms of the inputs, filters and outputs that are
// adds only. F(2x2, 3x3) is the smallest tile: its transforms hold only 1,
// -1 and 1/2, and it rounds about like a direct sum (a larger tile, such as
// oneDNN's own Winograd kernel, rounds at 1e-3; docs/PERFORMANCE.md).
//
// The forward and the backward data (a convolution of dy with the filters
// turned by 180 degrees and their channels swapped) run this way, and the
// filter gradient as F(3x3, 2x2) (each tile's 2x2 block of dy as the
// "filter" over its 4x4 block of x; conv_winograd.cc). Forward, per call:
//   U[e][ci][co]   the 16 transformed elements e of each filter (G g G^T),
//                  for every channel pair, once;
// then per chunk of tiles, one chunk per thread at a time, sized to stay in
// the thread's L2 cache:
//   V[e][t][ci]    each tile's 4x4 input block, transformed (B^T d B),
//   M[e][t][co]    = V[e] . U[e], sixteen matrix products,
//   y              each tile's 2x2 outputs (A^T M A), plus the bias and the
//                  fused ReLU, written to the output's channel blocks.
// Activations are in the channel blocks oneDNN's kernels take on the CPU,
// and the transforms work on a block at once in one register: 16 channels
// (nChw16c) in AVX-512 registers, 8 (nChw8c) in AVX2 ones (the kernels are
// written once, conv_winograd_kernels.inc, and compiled for each). So the op
// applies only where WinogradConv2dApplies says (3x3, stride 1, padding 1,
// 16-channel blocks with AVX-512 or 8-channel blocks with AVX2 and FMA on
// both sides). It computes in float32 always; the CPU backend (by default,
// `conv=auto`) takes it there where it measured faster than oneDNN's direct
// kernel (in float32, or in bfloat16 with `compute=bf16`; conv_choice.h),
// and oneDNN's direct kernel elsewhere.
//
// Thread-safety: as Conv2dOp (one thread at a time).
#ifndef PSGD_WORKER_CPU_CONV_WINOGRAD_H_
#define PSGD_WORKER_CPU_CONV_WINOGRAD_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "worker/backend/backend.h"
#include "worker/cpu/onednn_util.h"

namespace psgd {

// Whether this shape runs as F(2x2, 3x3) on this CPU (see above).
bool WinogradConv2dApplies(const Conv2dShape& shape);

// INVALID_ARGUMENT for an invalid shape, FAILED_PRECONDITION naming the
// reason for one WinogradConv2dApplies refuses; INTERNAL if oneDNN has no
// kernel for the backward filter. `context` and `pool` are not owned and
// must outlive the op.
absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateWinogradConv2d(
    const Conv2dShape& shape, OneDnnContext* context, ThreadPool* pool);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_CONV_WINOGRAD_H_
