// The CPU backend: the reference that the CUDA backend is checked against,
// and the backend of every test and of machines without a GPU.
//
// "Device" memory is 64-byte aligned host memory. By default the 3x3,
// stride-1 convolutions run as Winograd's F(2x2, 3x3) (float32; on
// 16-channel blocks with AVX-512, on 8-channel blocks with AVX2 and FMA;
// conv_winograd.h) where it measured faster than oneDNN's direct kernel for
// the shape (conv_choice.h; CpuConvChoices says what was chosen), the other
// convolutions and the matrix
// products through oneDNN (its OpenMP threads); pooling, LRN, ReLU, bias and
// the loss are this folder's kernels on a ThreadPool of the same size (the
// OpenMP team). Other kernels can be chosen by name for measurement:
//
//   cpu                conv=auto,gemm=onednn,lrn=fused,pool=openmp
//                      (the default)
//   cpu:conv=winograd  Winograd wherever it applies, without measuring
//   cpu:conv=onednn    oneDNN's direct convolution for every shape
//   cpu:conv=im2col    im2col + GEMM convolution
//   cpu:gemm=openblas  OpenBLAS for every GEMM (with conv=im2col, also the
//                      convolutions' GEMMs)
//   cpu:lrn=onednn     oneDNN's LRN primitive instead of our fused kernel
//   cpu:pool=threads   our kernels on threads of their own instead of
//                      oneDNN's OpenMP team (see thread_pool.h)
//   cpu:layout=plain   activations in NCHW between layers instead of the
//                      channel blocks oneDNN's kernels take (16 channels
//                      with AVX-512, 8 with AVX2; ChannelBlock), which
//                      then reorder at each call
//   cpu:compute=bf16   oneDNN's direct convolutions compute in bfloat16
//                      (their inputs rounded at each call, float32
//                      accumulation and outputs; weights, activations and
//                      the rest stay float32), where the CPU has AVX-512
//                      BF16. With conv=auto, a shape Winograd takes runs
//                      whichever of Winograd (float32) and the direct
//                      kernel in bfloat16 measured faster for it;
//                      conv=onednn puts every convolution in bfloat16
// Under ThreadSanitizer the pool always has threads of its own and the
// libraries run on one thread (see SetLibraryThreads).
//
// Thread-safety: as Backend (one thread at a time). The thread count is set
// for OpenMP in the calling thread before each oneDNN call; OpenBLAS's
// thread count is process-wide, so two CPU backends with different counts
// in one process share the last one set.
#ifndef PSGD_WORKER_CPU_CPU_BACKEND_H_
#define PSGD_WORKER_CPU_CPU_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/thread_pool.h"
#include "worker/backend/backend.h"
#include "worker/cpu/gemm.h"

namespace psgd {

enum class ConvAlgorithm { kAuto, kOneDnn, kIm2col, kWinograd };
enum class LrnAlgorithm { kFused, kOneDnn };

struct CpuBackendOptions {
  int threads = 0;  // 0: one per core
  // kWinograd: F(2x2, 3x3) (float32) where WinogradConv2dApplies, oneDNN's
  // direct kernel elsewhere. kAuto: where it applies, whichever of the two
  // measured faster for the shape (conv_choice.h), the direct kernel in
  // this backend's compute (bf16_compute).
  ConvAlgorithm conv = ConvAlgorithm::kAuto;
  LrnAlgorithm lrn = LrnAlgorithm::kFused;
  GemmLibrary gemm = GemmLibrary::kOneDnn;
  ThreadPool::Runtime pool = ThreadPool::Runtime::kOpenMp;
  // Activations kept in the channel-blocked layout between layers (with
  // conv=onednn; im2col takes NCHW only).
  bool blocked_layout = true;
  // oneDNN's direct convolutions in bfloat16 (on CPUs with AVX-512 BF16).
  bool bf16_compute = false;
};

// Parses "cpu" or "cpu:key=value,key=value" (keys conv:
// auto|onednn|im2col|winograd, gemm:
// onednn|openblas, lrn: fused|onednn, pool: openmp|threads, layout:
// blocked|plain, compute: f32|bf16) into options
// with `threads`.
// INVALID_ARGUMENT naming an unknown key or value.
absl::StatusOr<CpuBackendOptions> ParseCpuBackendName(absl::string_view name,
                                                      int threads);

// Whether a backend with these options runs Winograd convolutions at all
// (on the shapes WinogradConv2dApplies takes): conv=winograd or auto (in
// either compute), channel blocks, a CPU with AVX-512 or with AVX2 and FMA.
bool RunsWinograd(const CpuBackendOptions& options);

// The choices conv=auto has made in this process, one line per shape:
// "SHAPE, T threads: Winograd X ms, direct Y ms: KERNEL".
std::vector<std::string> CpuConvChoices();

// The backend; INVALID_ARGUMENT for threads < 0 or for bf16_compute with
// conv=im2col, FAILED_PRECONDITION for bf16_compute on a CPU without AVX-512
// BF16, INTERNAL if oneDNN has no CPU engine.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    const CpuBackendOptions& options);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_CPU_BACKEND_H_
