#include "worker/cpu/gemm.h"

#include <cblas.h>

#include "absl/strings/str_cat.h"
#include "dnnl.h"
#include "worker/cpu/onednn_util.h"

namespace psgd {

absl::Status Sgemm(const GemmConfig& config, bool trans_a, bool trans_b,
                   int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta,
                   float* c, int64_t ldc) {
  SetLibraryThreads(config.threads);
  if (config.library == GemmLibrary::kOpenBlas) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc);
    return absl::OkStatus();
  }
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m,
                                    n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    return absl::InternalError(absl::StrCat("dnnl_sgemm(m=", m, ", n=", n,
                                            ", k=", k, ") failed: status ",
                                            static_cast<int>(status)));
  }
  return absl::OkStatus();
}

}  // namespace psgd
