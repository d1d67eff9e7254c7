#include "worker/cpu/conv_im2col.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cpu/elementwise.h"

namespace psgd {
namespace {

class Im2colConv2d : public Conv2dOp {
 public:
  Im2colConv2d(const Conv2dShape& shape, const GemmConfig& gemm,
               ThreadPool* pool)
      : shape_(shape),
        gemm_(gemm),
        pool_(pool),
        pad_h_(ComputeSamePadding(shape.height, shape.kernel_h, 1)),
        pad_w_(ComputeSamePadding(shape.width, shape.kernel_w, 1)),
        rows_(shape.in_channels * shape.kernel_h * shape.kernel_w),
        plane_(shape.height * shape.width),
        col_(static_cast<size_t>(rows_ * plane_)) {}

  const Conv2dShape& shape() const override { return shape_; }

 private:
  absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                         ConstDeviceView b, DeviceView y) override {
    for (int64_t n = 0; n < shape_.batch; ++n) {
      Im2col(x.data() + n * shape_.in_channels * plane_);
      // y_n (O, HW) = w (O, CKK) . col (CKK, HW)
      RETURN_IF_ERROR(Sgemm(gemm_, false, false, shape_.out_channels, plane_,
                            rows_, 1.0f, w.data(), rows_, col_.data(), plane_,
                            0.0f, y.data() + n * shape_.out_channels * plane_,
                            plane_));
    }
    BiasAddKernel(shape_.batch, shape_.out_channels, plane_, b.data(), y.data(),
                  pool_);
    if (shape_.relu) {
      ReluForwardKernel(shape_.batch * shape_.out_channels * plane_, y.data(),
                        y.data(), pool_);
    }
    return absl::OkStatus();
  }

  absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                              DeviceView dx) override {
    for (int64_t n = 0; n < shape_.batch; ++n) {
      // dcol (CKK, HW) = w^T (CKK, O) . dy_n (O, HW)
      RETURN_IF_ERROR(Sgemm(gemm_, true, false, rows_, plane_,
                            shape_.out_channels, 1.0f, w.data(), rows_,
                            dy.data() + n * shape_.out_channels * plane_,
                            plane_, 0.0f, col_.data(), plane_));
      Col2im(dx.data() + n * shape_.in_channels * plane_);
    }
    return absl::OkStatus();
  }

  absl::Status DoBackwardFilter(ConstDeviceView x, ConstDeviceView dy,
                                DeviceView dw, DeviceView db) override {
    for (int64_t n = 0; n < shape_.batch; ++n) {
      Im2col(x.data() + n * shape_.in_channels * plane_);
      // dw (O, CKK) += dy_n (O, HW) . col^T (HW, CKK)
      RETURN_IF_ERROR(
          Sgemm(gemm_, false, true, shape_.out_channels, rows_, plane_, 1.0f,
                dy.data() + n * shape_.out_channels * plane_, plane_,
                col_.data(), plane_, n == 0 ? 0.0f : 1.0f, dw.data(), rows_));
    }
    BiasGradKernel(shape_.batch, shape_.out_channels, plane_, dy.data(),
                   db.data(), pool_);
    return absl::OkStatus();
  }

  // Calls fn(row, c, kh, kw) for the rows [begin, end) of the column matrix.
  template <typename Fn>
  void ForRows(int64_t begin, int64_t end, Fn&& fn) const {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t kw = r % shape_.kernel_w;
      const int64_t kh = (r / shape_.kernel_w) % shape_.kernel_h;
      const int64_t c = r / (shape_.kernel_w * shape_.kernel_h);
      fn(r, c, kh, kw);
    }
  }

  // The input rows (or columns) that filter tap `k` reads for the outputs
  // [begin, end) that have one: output o reads input o + k - pad.before.
  static std::pair<int64_t, int64_t> ValidOutputs(int64_t k,
                                                  const SamePadding& pad,
                                                  int64_t size) {
    const int64_t shift = k - pad.before;
    return {std::max<int64_t>(0, -shift), std::min(size, size - shift)};
  }

  // image: (C, H, W)  ->  col_: (C*KH*KW, H*W)
  void Im2col(const float* image) {
    const int64_t H = shape_.height, W = shape_.width;
    pool_->ParallelFor(rows_, 8, [&](int64_t begin, int64_t end) {
      ForRows(begin, end, [&](int64_t r, int64_t c, int64_t kh, int64_t kw) {
        float* out = col_.data() + r * plane_;
        std::memset(out, 0, plane_ * sizeof(float));
        const auto [h0, h1] = ValidOutputs(kh, pad_h_, H);
        const auto [w0, w1] = ValidOutputs(kw, pad_w_, W);
        const float* in = image + c * plane_;
        const int64_t sh = kh - pad_h_.before, sw = kw - pad_w_.before;
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) {
            out[h * W + w] = in[(h + sh) * W + w + sw];
          }
        }
      });
    });
  }

  // col_: (C*KH*KW, H*W)  ->  image: (C, H, W), summing overlapping taps.
  // Threads split the channels, so no two write the same plane.
  void Col2im(float* image) {
    const int64_t H = shape_.height, W = shape_.width;
    const int64_t taps = shape_.kernel_h * shape_.kernel_w;
    pool_->ParallelFor(shape_.in_channels, 1, [&](int64_t begin, int64_t end) {
      std::memset(image + begin * plane_, 0,
                  (end - begin) * plane_ * sizeof(float));
      ForRows(begin * taps, end * taps,
              [&](int64_t r, int64_t c, int64_t kh, int64_t kw) {
                const float* in = col_.data() + r * plane_;
                const auto [h0, h1] = ValidOutputs(kh, pad_h_, H);
                const auto [w0, w1] = ValidOutputs(kw, pad_w_, W);
                float* out = image + c * plane_;
                const int64_t sh = kh - pad_h_.before;
                const int64_t sw = kw - pad_w_.before;
                for (int64_t h = h0; h < h1; ++h) {
                  for (int64_t w = w0; w < w1; ++w) {
                    out[(h + sh) * W + w + sw] += in[h * W + w];
                  }
                }
              });
    });
  }

  const Conv2dShape shape_;
  const GemmConfig gemm_;
  ThreadPool* const pool_;  // Not owned.
  const SamePadding pad_h_, pad_w_;
  const int64_t rows_;   // C * KH * KW
  const int64_t plane_;  // H * W
  std::vector<float> col_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateIm2colConv2d(
    const Conv2dShape& shape, const GemmConfig& gemm, ThreadPool* pool) {
  RETURN_IF_ERROR(shape.Validate());
  if (shape.in_block != 0 || shape.out_block != 0) {
    return absl::UnimplementedError(
        absl::StrCat(shape.ToString(),
                     ": the im2col convolution takes NCHW only, not channel "
                     "blocks (cpu:conv=onednn does)"));
  }
  if (!shape.default_form()) {
    return absl::UnimplementedError(absl::StrCat(
        shape.ToString(),
        ": the im2col convolution runs stride 1, SAME padding with a bias "
        "only; use conv=onednn"));
  }
  return std::unique_ptr<Conv2dOp>(
      std::make_unique<Im2colConv2d>(shape, gemm, pool));
}

}  // namespace psgd
