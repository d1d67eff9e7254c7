#include "worker/gpu/cublas_util.h"

#include "absl/strings/str_cat.h"

namespace psgd::gpu {

absl::Status CublasStatus(cublasStatus_t status, absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  absl::StatusCode code = absl::StatusCode::kInternal;
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      code = absl::StatusCode::kResourceExhausted;
      break;
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      code = absl::StatusCode::kFailedPrecondition;
      break;
    default:
      break;
  }
  return absl::Status(
      code, absl::StrCat(call, " failed: ", cublasGetStatusName(status), ": ",
                         cublasGetStatusString(status)));
}

absl::StatusOr<CublasHandle> CublasHandle::Create(cudaStream_t stream,
                                                  bool tf32) {
  cublasHandle_t raw = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&raw));
  CublasHandle handle(raw);
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(raw, stream));
  CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
      raw, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return handle;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

std::string CublasVersionString() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
    return "cuBLAS ? (cublasGetProperty failed)";
  }
  return absl::StrCat("cuBLAS ", major, ".", minor, ".", patch, " (built with ",
                      CUBLAS_VER_MAJOR, ".", CUBLAS_VER_MINOR, ".",
                      CUBLAS_VER_PATCH, ")");
}

}  // namespace psgd::gpu
