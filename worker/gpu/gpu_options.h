// The CUDA backend's options and the names that select them:
//
//   gpu:K                         device K with the defaults below
//   gpu:K:key=value,key=value     with chosen options:
//     tf32=off|on                 TF32 tensor cores in cuDNN convolutions and
//                                 cuBLAS GEMMs (default off: the tests'
//                                 float32 tolerance of 1e-4 needs it off)
//     conv_algo=find|heuristic    cuDNN convolution algorithms chosen once per
//                                 shape by timing them (cudnnFind*Ex, the
//                                 default) or by cuDNN's heuristics
//                                 (cudnnGet*_v7, no timing runs)
//     lrn=cudnn|kernel            LRN through cuDNN (default; parameters
//                                 outside cuDNN's limits use the kernel) or
//                                 always this folder's kernel
//     deterministic=off|on        only cuDNN algorithms that give bitwise
//                                 repeatable results
//     workspace_mb=N              the most cuDNN workspace one algorithm may
//                                 use (default 256)
//
// Plain C++ (no CUDA headers): the parser is built and tested everywhere.
//
// Thread-safety: plain values and a pure function.
#ifndef PSGD_WORKER_GPU_GPU_OPTIONS_H_
#define PSGD_WORKER_GPU_GPU_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psgd {

enum class ConvAlgoSearch { kFind, kHeuristic };
enum class GpuLrn { kCudnn, kKernel };

struct GpuBackendOptions {
  int device = 0;
  bool tf32 = false;
  ConvAlgoSearch conv_algo = ConvAlgoSearch::kFind;
  GpuLrn lrn = GpuLrn::kCudnn;
  bool deterministic = false;
  int64_t workspace_limit_bytes = int64_t{256} << 20;

  // "gpu:0", or "gpu:0:tf32=on,..." listing the options that differ from
  // the defaults (parses back to the same options).
  std::string ToString() const;
};

// Parses a name as above. INVALID_ARGUMENT naming the part that is wrong
// (not "gpu:", a device that is not a non-negative integer, an unknown key or
// value).
absl::StatusOr<GpuBackendOptions> ParseGpuBackendName(absl::string_view name);

}  // namespace psgd

#endif  // PSGD_WORKER_GPU_GPU_OPTIONS_H_
