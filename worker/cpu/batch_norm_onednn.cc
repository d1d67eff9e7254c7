#include "worker/cpu/batch_norm_onednn.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "worker/cpu/elementwise.h"

namespace psgd {
namespace {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;
using Flags = dnnl::normalization_flags;
using BnForward = dnnl::batch_normalization_forward;
using BnBackward = dnnl::batch_normalization_backward;

// x: (N, C, plane)  ->  mean, var: (C), the mean and biased variance of
// each channel, summed in double (as PyTorch's CPU batch norm): oneDNN's
// float32 sums over N * H * W = 10^5 values move outputs near zero by
// ~1e-6, enough to flip a fused ReLU's mask against a float64 reference.
void BatchStatistics(int64_t batch, int64_t channels, int64_t plane,
                     const float* x, float* mean, float* var,
                     ThreadPool* pool) {
  const double m = static_cast<double>(batch * plane);
  pool->ParallelFor(channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      double sum = 0.0, sum_sq = 0.0;
      for (int64_t n = 0; n < batch; ++n) {
        const float* row = x + (n * channels + c) * plane;
        for (int64_t i = 0; i < plane; ++i) {
          const double v = row[i];
          sum += v;
          sum_sq += v * v;
        }
      }
      const double mu = sum / m;
      mean[c] = static_cast<float>(mu);
      var[c] = static_cast<float>(std::max(sum_sq / m - mu * mu, 0.0));
    }
  });
}

// The same over the channel-blocked layout (N, C / block, plane, block):
// each thread sums a share of the batch for every channel, block lanes
// innermost (one channel block may be all the channels, so the channels
// alone would not split), and the shares are added after.
void BlockedBatchStatistics(int64_t batch, int64_t channels, int64_t plane,
                            int64_t block, const float* x, float* mean,
                            float* var, ThreadPool* pool) {
  const int64_t parts =
      std::min<int64_t>(batch, std::max(pool->num_threads(), 1));
  const int64_t blocks = channels / block;
  // Per part: the channels' sums, then their sums of squares.
  std::vector<double> partial(parts * 2 * channels, 0.0);
  pool->ParallelFor(parts, 1, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part) {
      double* sum = partial.data() + part * 2 * channels;
      double* sum_sq = sum + channels;
      const int64_t n_begin = batch * part / parts;
      const int64_t n_end = batch * (part + 1) / parts;
      for (int64_t n = n_begin; n < n_end; ++n) {
        for (int64_t cb = 0; cb < blocks; ++cb) {
          const float* rows = x + (n * blocks + cb) * plane * block;
          double* s = sum + cb * block;
          double* q = sum_sq + cb * block;
          for (int64_t i = 0; i < plane; ++i) {
            const float* v = rows + i * block;
            for (int64_t l = 0; l < block; ++l) {
              const double d = v[l];
              s[l] += d;
              q[l] += d * d;
            }
          }
        }
      }
    }
  });
  const double m = static_cast<double>(batch * plane);
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0, sum_sq = 0.0;
    for (int64_t part = 0; part < parts; ++part) {
      sum += partial[part * 2 * channels + c];
      sum_sq += partial[part * 2 * channels + channels + c];
    }
    const double mu = sum / m;
    mean[c] = static_cast<float>(mu);
    var[c] = static_cast<float>(std::max(sum_sq / m - mu * mu, 0.0));
  }
}

class OneDnnBatchNorm : public BatchNormOp {
 public:
  OneDnnBatchNorm(const BatchNormShape& shape, OneDnnContext* context,
                  ThreadPool* pool)
      : shape_(shape), context_(context), pool_(pool) {}

  // Builds the primitives; INTERNAL on a oneDNN error.
  absl::Status Init();

  const BatchNormShape& shape() const override { return shape_; }

 private:
  // x, y: (N, C, H, W); gamma, beta, batch_mean, batch_var, running_mean,
  // running_var: (C).
  absl::Status DoForwardTraining(ConstDeviceView x, ConstDeviceView gamma,
                                 ConstDeviceView beta, DeviceView y,
                                 DeviceView batch_mean, DeviceView batch_var,
                                 DeviceView running_mean,
                                 DeviceView running_var) override {
    const int64_t plane = shape_.height * shape_.width;
    if (shape_.channel_block > 0) {
      BlockedBatchStatistics(shape_.batch, shape_.channels, plane,
                             shape_.channel_block, x.data(), batch_mean.data(),
                             batch_var.data(), pool_);
    } else {
      BatchStatistics(shape_.batch, shape_.channels, plane, x.data(),
                      batch_mean.data(), batch_var.data(), pool_);
    }
    RETURN_IF_ERROR(CatchOneDnn(shape_.ToString() + " forward", [&] {
      context_->PrepareThread();
      dnnl::stream& s = context_->stream;
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, Bind(x_, x.data())},
          {DNNL_ARG_DST, Bind(y_, y.data())},
          {DNNL_ARG_SCALE, Bind(scale_, gamma.data())},
          {DNNL_ARG_SHIFT, Bind(shift_, beta.data())},
          {DNNL_ARG_MEAN, Bind(mean_, batch_mean.data())},
          {DNNL_ARG_VARIANCE, Bind(var_, batch_var.data())}};
      train_.execute(s, args);
      s.wait();
    }));
    // The ReLU that follows (shape_.relu): in the primitive on channel
    // blocks (FusedRelu), else in a pass of its own: oneDNN's
    // fuse_norm_relu on the plain (NCHW) layout took 4.5x the plain
    // normalisation (ResNet-20's layer1 bn1, 10.4 against 2.3 ms at batch
    // 128, docs/PERFORMANCE.md), the separate pass a few percent. The
    // values are the same: max(y, 0) either way.
    if (shape_.relu && !FusedRelu()) {
      ReluForwardKernel(y.size(), y.data(), y.data(), pool_);
    }
    // PyTorch's update: the variance that goes into the running estimate
    // is unbiased (divided by M - 1, M = N * H * W).
    const int64_t m = shape_.batch * shape_.height * shape_.width;
    const float unbias = m > 1 ? static_cast<float>(m) / (m - 1) : 1.0f;
    const float mo = shape_.momentum;
    for (int64_t c = 0; c < shape_.channels; ++c) {
      running_mean.data()[c] =
          (1.0f - mo) * running_mean.data()[c] + mo * batch_mean.data()[c];
      running_var.data()[c] = (1.0f - mo) * running_var.data()[c] +
                              mo * unbias * batch_var.data()[c];
    }
    return absl::OkStatus();
  }

  // x, y: (N, C, H, W); gamma, beta, running_mean, running_var: (C).
  absl::Status DoForwardInference(ConstDeviceView x, ConstDeviceView gamma,
                                  ConstDeviceView beta,
                                  ConstDeviceView running_mean,
                                  ConstDeviceView running_var,
                                  DeviceView y) override {
    RETURN_IF_ERROR(CatchOneDnn(shape_.ToString() + " inference", [&] {
      context_->PrepareThread();
      dnnl::stream& s = context_->stream;
      infer_.execute(s, {{DNNL_ARG_SRC, Bind(x_, x.data())},
                         {DNNL_ARG_DST, Bind(y_, y.data())},
                         {DNNL_ARG_SCALE, Bind(scale_, gamma.data())},
                         {DNNL_ARG_SHIFT, Bind(shift_, beta.data())},
                         {DNNL_ARG_MEAN, Bind(mean_, running_mean.data())},
                         {DNNL_ARG_VARIANCE, Bind(var_, running_var.data())}});
      s.wait();
    }));
    if (shape_.relu && !FusedRelu()) {
      ReluForwardKernel(y.size(), y.data(), y.data(), pool_);
    }
    return absl::OkStatus();
  }

  // x, y, dy, dx: (N, C, H, W); gamma, batch_mean, batch_var, dgamma, dbeta:
  // (C).
  absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                          ConstDeviceView dy, ConstDeviceView gamma,
                          ConstDeviceView batch_mean, ConstDeviceView batch_var,
                          DeviceView dx, DeviceView dgamma,
                          DeviceView dbeta) override {
    const float* diff_dst = dy.data();
    if (shape_.relu) {
      // The ReLU's backward, into dx; the normalisation's then runs in
      // place on dx.
      ReluBackwardKernel(dx.size(), y.data(), dy.data(), dx.data(), pool_);
      diff_dst = dx.data();
    }
    return CatchOneDnn(shape_.ToString() + " backward", [&] {
      context_->PrepareThread();
      dnnl::stream& s = context_->stream;
      backward_.execute(s,
                        {{DNNL_ARG_SRC, Bind(x_, x.data())},
                         {DNNL_ARG_DIFF_DST, Bind(dy_, diff_dst)},
                         {DNNL_ARG_SCALE, Bind(scale_, gamma.data())},
                         // oneDNN 2.6 checks for a shift argument under
                         // use_shift though the backward never reads it (no
                         // gradient depends on beta): gamma's memory stands in.
                         {DNNL_ARG_SHIFT, Bind(shift_, gamma.data())},
                         {DNNL_ARG_MEAN, Bind(mean_, batch_mean.data())},
                         {DNNL_ARG_VARIANCE, Bind(var_, batch_var.data())},
                         {DNNL_ARG_DIFF_SRC, Bind(dx_, dx.data())},
                         {DNNL_ARG_DIFF_SCALE, Bind(dscale_, dgamma.data())},
                         {DNNL_ARG_DIFF_SHIFT, Bind(dshift_, dbeta.data())}});
      s.wait();
    });
  }

  // Whether the forward primitives apply the ReLU themselves (on channel
  // blocks, where oneDNN's fused kernel is as fast as the plain one).
  bool FusedRelu() const { return shape_.relu && shape_.channel_block > 0; }

  // oneDNN takes non-const handles but does not write its sources.
  static const memory& Bind(memory& m, const float* data) {
    m.set_data_handle(const_cast<float*>(data));
    return m;
  }

  const BatchNormShape shape_;
  OneDnnContext* const context_;  // Not owned.
  ThreadPool* const pool_;        // Not owned.

  BnForward train_, infer_;
  BnBackward backward_;
  // Handles onto the caller's memory, set per call.
  memory x_, y_, dy_, dx_, scale_, shift_, mean_, var_, dscale_, dshift_;
};

absl::Status OneDnnBatchNorm::Init() {
  return CatchOneDnn(shape_.ToString() + " plan", [&] {
    // Primitives take their thread count when they are made: the
    // context's, not OpenMP's default of one per core.
    context_->PrepareThread();
    const dnnl::engine& eng = context_->engine;
    const Shape in = shape_.input();
    const memory::desc data_md(memory::dims(in.begin(), in.end()),
                               memory::data_type::f32,
                               ActivationTag(shape_.channel_block));
    const memory::desc param_md({shape_.channels}, memory::data_type::f32,
                                Tag::x);
    const Flags affine = Flags::use_scale | Flags::use_shift;
    const float eps = shape_.epsilon;

    // Training normalises with the statistics BatchStatistics computed:
    // the same arithmetic as inference with given statistics, which is
    // what the fused ReLU runs as (a training primitive with it would also
    // write a mask for oneDNN's backward, which the ReLU's backward here
    // does not use).
    const Flags relu = FusedRelu() ? Flags::fuse_norm_relu : Flags::none;
    BnForward::primitive_desc train_pd(
        BnForward::desc(FusedRelu() ? dnnl::prop_kind::forward_inference
                                    : dnnl::prop_kind::forward_training,
                        data_md, eps, affine | Flags::use_global_stats | relu),
        eng);
    BnForward::primitive_desc infer_pd(
        BnForward::desc(dnnl::prop_kind::forward_inference, data_md, eps,
                        affine | Flags::use_global_stats | relu),
        eng);
    // The backward's hint: training without the ReLU, whose backward runs
    // outside the primitive too (see Backward).
    BnForward::primitive_desc hint_pd(
        BnForward::desc(dnnl::prop_kind::forward_training, data_md, eps,
                        affine),
        eng);
    BnBackward::primitive_desc backward_pd(
        BnBackward::desc(dnnl::prop_kind::backward, data_md, data_md, eps,
                         affine),
        eng, hint_pd);
    train_ = BnForward(train_pd);
    infer_ = BnForward(infer_pd);
    backward_ = BnBackward(backward_pd);
    for (memory* m : {&x_, &y_, &dy_, &dx_}) {
      *m = memory(data_md, eng, DNNL_MEMORY_NONE);
    }
    for (memory* m : {&scale_, &shift_, &mean_, &var_, &dscale_, &dshift_}) {
      *m = memory(param_md, eng, DNNL_MEMORY_NONE);
    }
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateOneDnnBatchNorm(
    const BatchNormShape& shape, OneDnnContext* context, ThreadPool* pool) {
  RETURN_IF_ERROR(shape.Validate());
  auto op = std::make_unique<OneDnnBatchNorm>(shape, context, pool);
  RETURN_IF_ERROR(op->Init());
  return std::unique_ptr<BatchNormOp>(std::move(op));
}

}  // namespace psgd
