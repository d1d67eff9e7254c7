// Row-major single-precision GEMM through one of two libraries, chosen by the
// CPU backend's options:
//   kOneDnn    oneDNN's dnnl_sgemm (its OpenMP threads; the default: its
//              AVX-512 kernels run at 250-330 GFLOP/s here)
//   kOpenBlas  OpenBLAS's cblas_sgemm (its own pthreads). Debian's 0.3.21
//              does not know this project's Xeon (family 6 model 207) and
//              falls back to its Prescott kernels, about 60 GFLOP/s.
// docs/COMPUTE.md has the measurements.
//
// Thread-safety: calls may run from several threads; each library
// synchronises its own threads. A call sets the libraries' thread counts
// (SetLibraryThreads in onednn_util.h).
#ifndef PSGD_WORKER_CPU_GEMM_H_
#define PSGD_WORKER_CPU_GEMM_H_

#include <cstdint>

#include "absl/status/status.h"

namespace psgd {

enum class GemmLibrary { kOneDnn, kOpenBlas };

struct GemmConfig {
  GemmLibrary library = GemmLibrary::kOneDnn;
  int threads = 1;
};

// C (m, n) = alpha * op(A) . op(B) + beta * C, row-major, where op(A) is
// (m, k) (A is (k, m) when trans_a) and op(B) is (k, n) (B is (n, k) when
// trans_b). lda, ldb, ldc are the row strides of A, B, C as stored.
// INTERNAL if the library refuses the call.
absl::Status Sgemm(const GemmConfig& config, bool trans_a, bool trans_b,
                   int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta,
                   float* c, int64_t ldc);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_GEMM_H_
