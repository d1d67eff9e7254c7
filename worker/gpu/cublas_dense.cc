#include "worker/gpu/cublas_dense.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/gpu/cublas_util.h"
#include "worker/gpu/elementwise.h"

namespace psgd::gpu {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

class CublasDense : public DenseOp {
 public:
  CublasDense(const DenseShape& shape, GpuContext* context)
      : shape_(shape),
        name_(shape.ToString()),
        ctx_(context),
        n_(static_cast<int>(shape.batch)),
        k_(static_cast<int>(shape.inputs)),
        m_(static_cast<int>(shape.outputs)) {}

  const DenseShape& shape() const override { return shape_; }

  absl::Status Init() {
    RETURN_IF_ERROR(ctx_->Activate());
    ASSIGN_OR_RETURN(bias_scratch_,
                     DeviceBuffer::Allocate(
                         sizeof(double) * BiasGradScratchElements(
                                              shape_.batch, shape_.outputs),
                         ctx_->stream()));
    return absl::OkStatus();
  }

 private:
  absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                         ConstDeviceView b, DeviceView y) override {
    return WithPrefix(RunForward(x.data(), w.data(), b.data(), y.data()),
                      name_ + " forward: ");
  }

  absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                              DeviceView dx) override {
    return WithPrefix(RunBackwardData(dy.data(), w.data(), dx.data()),
                      name_ + " backward data: ");
  }

  absl::Status DoBackwardWeights(ConstDeviceView x, ConstDeviceView dy,
                                 DeviceView dw, DeviceView db) override {
    return WithPrefix(
        RunBackwardWeights(x.data(), dy.data(), dw.data(), db.data()),
        name_ + " backward weights: ");
  }

  // x: (N, K); w: (K, M); b: (M) -> y: (N, M)
  absl::Status RunForward(const float* x, const float* w, const float* b,
                          float* y) {
    RETURN_IF_ERROR(ctx_->Activate());
    CUBLAS_RETURN_IF_ERROR(cublasSgemm(ctx_->cublas(), CUBLAS_OP_N, CUBLAS_OP_N,
                                       m_, n_, k_, &kOne, w, m_, x, k_, &kZero,
                                       y, m_));
    return LaunchBiasAdd(shape_.batch, shape_.outputs, 1, b, y, ctx_->stream());
  }

  // dy: (N, M); w: (K, M) -> dx: (N, K)
  absl::Status RunBackwardData(const float* dy, const float* w, float* dx) {
    RETURN_IF_ERROR(ctx_->Activate());
    CUBLAS_RETURN_IF_ERROR(cublasSgemm(ctx_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N,
                                       k_, n_, m_, &kOne, w, m_, dy, m_, &kZero,
                                       dx, k_));
    return absl::OkStatus();
  }

  // x: (N, K); dy: (N, M) -> dw: (K, M), db: (M)
  absl::Status RunBackwardWeights(const float* x, const float* dy, float* dw,
                                  float* db) {
    RETURN_IF_ERROR(ctx_->Activate());
    CUBLAS_RETURN_IF_ERROR(cublasSgemm(ctx_->cublas(), CUBLAS_OP_N, CUBLAS_OP_T,
                                       m_, k_, n_, &kOne, dy, m_, x, k_, &kZero,
                                       dw, m_));
    return LaunchBiasGrad(shape_.batch, shape_.outputs, 1, dy, db,
                          bias_scratch_.as<double>(), ctx_->stream());
  }

  const DenseShape shape_;
  const std::string name_;
  GpuContext* const ctx_;  // Not owned.
  const int n_, k_, m_;    // batch, inputs, outputs
  DeviceBuffer bias_scratch_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DenseOp>> CreateCublasDense(
    const DenseShape& shape, GpuContext* context) {
  RETURN_IF_ERROR(shape.Validate());
  for (int64_t d :
       {shape.batch, shape.inputs, shape.outputs, shape.batch * shape.inputs,
        shape.batch * shape.outputs, shape.inputs * shape.outputs}) {
    if (d > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(shape.ToString(), ": beyond cuBLAS's int dimensions"));
    }
  }
  auto op = std::make_unique<CublasDense>(shape, context);
  RETURN_IF_ERROR(WithPrefix(op->Init(), shape.ToString() + ": "));
  return std::unique_ptr<DenseOp>(std::move(op));
}

}  // namespace psgd::gpu
