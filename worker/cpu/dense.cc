#include "worker/cpu/dense.h"

#include <algorithm>

#include "common/status_macros.h"
#include "worker/cpu/elementwise.h"

namespace psgd {
namespace {

class CpuDense : public DenseOp {
 public:
  CpuDense(const DenseShape& shape, const GemmConfig& gemm, ThreadPool* pool)
      : shape_(shape), gemm_(gemm), pool_(pool) {}

  const DenseShape& shape() const override { return shape_; }

 private:
  absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                         ConstDeviceView b, DeviceView y) override {
    const int64_t N = shape_.batch, K = shape_.inputs, M = shape_.outputs;
    // y = b broadcast over rows, then y += x . w.
    for (int64_t n = 0; n < N; ++n) {
      std::copy(b.data(), b.data() + M, y.data() + n * M);
    }
    return Sgemm(gemm_, false, false, N, M, K, 1.0f, x.data(), K, w.data(), M,
                 1.0f, y.data(), M);
  }

  absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                              DeviceView dx) override {
    const int64_t N = shape_.batch, K = shape_.inputs, M = shape_.outputs;
    // dx (N, K) = dy (N, M) . w^T (M, K)
    return Sgemm(gemm_, false, true, N, K, M, 1.0f, dy.data(), M, w.data(), M,
                 0.0f, dx.data(), K);
  }

  absl::Status DoBackwardWeights(ConstDeviceView x, ConstDeviceView dy,
                                 DeviceView dw, DeviceView db) override {
    const int64_t N = shape_.batch, K = shape_.inputs, M = shape_.outputs;
    // dw (K, M) = x^T (K, N) . dy (N, M)
    RETURN_IF_ERROR(Sgemm(gemm_, true, false, K, M, N, 1.0f, x.data(), K,
                          dy.data(), M, 0.0f, dw.data(), M));
    BiasGradKernel(N, M, 1, dy.data(), db.data(), pool_);
    return absl::OkStatus();
  }

  const DenseShape shape_;
  const GemmConfig gemm_;
  ThreadPool* const pool_;  // Not owned.
};

}  // namespace

absl::StatusOr<std::unique_ptr<DenseOp>> CreateCpuDense(const DenseShape& shape,
                                                        const GemmConfig& gemm,
                                                        ThreadPool* pool) {
  RETURN_IF_ERROR(shape.Validate());
  return std::unique_ptr<DenseOp>(
      std::make_unique<CpuDense>(shape, gemm, pool));
}

}  // namespace psgd
