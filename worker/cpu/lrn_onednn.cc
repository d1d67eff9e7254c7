#include "worker/cpu/lrn_onednn.h"

#include <utility>

#include "common/status_macros.h"

namespace psgd {
namespace {

using dnnl::memory;

class OneDnnLrn : public LrnOp {
 public:
  OneDnnLrn(const LrnShape& shape, OneDnnContext* context)
      : shape_(shape), context_(context) {}

  absl::Status Init();

  const LrnShape& shape() const override { return shape_; }

 private:
  absl::Status DoForward(ConstDeviceView x, DeviceView y) override {
    return CatchOneDnn(shape_.ToString() + " forward", [&] {
      context_->PrepareThread();
      RunForward(x.data(), y.data());
      context_->stream.wait();
    });
  }

  absl::Status DoBackward(ConstDeviceView x, ConstDeviceView y,
                          ConstDeviceView dy, DeviceView dx) override {
    return CatchOneDnn(shape_.ToString() + " backward", [&] {
      context_->PrepareThread();
      dnnl::stream& s = context_->stream;
      if (x.data() != workspace_source_) {
        // The workspace is another input's: make it again (into dx, which
        // the backward pass overwrites anyway). Its pieces of the shared
        // workspace are free again once it has run.
        RunForward(x.data(), dx.data());
      }
      CallSpace space(&context_->workspace);
      backward_.execute(
          s, {{DNNL_ARG_SRC, bwd_x_.Input(x.data(), s, &space)},
              {DNNL_ARG_DIFF_DST, bwd_dy_.Input(dy.data(), s, &space)},
              {DNNL_ARG_WORKSPACE, workspace_},
              {DNNL_ARG_DIFF_SRC, bwd_dx_.Output(dx.data(), &space)}});
      bwd_dx_.FinishOutput(s);
      s.wait();
    });
  }

  void RunForward(const float* x, float* y) {
    dnnl::stream& s = context_->stream;
    CallSpace space(&context_->workspace);
    forward_.execute(s, {{DNNL_ARG_SRC, fwd_x_.Input(x, s, &space)},
                         {DNNL_ARG_DST, fwd_y_.Output(y, &space)},
                         {DNNL_ARG_WORKSPACE, workspace_}});
    fwd_y_.FinishOutput(s);
    workspace_source_ = x;
  }

  const LrnShape shape_;
  OneDnnContext* const context_;  // Not owned.
  dnnl::lrn_forward forward_;
  dnnl::lrn_backward backward_;
  memory workspace_;
  const float* workspace_source_ = nullptr;  // the x of the last forward
  LayoutBridge fwd_x_, fwd_y_, bwd_x_, bwd_dy_, bwd_dx_;
};

absl::Status OneDnnLrn::Init() {
  return CatchOneDnn(shape_.ToString() + " plan", [&] {
    // Primitives take their thread count when they are made: the
    // context's, not OpenMP's default of one per core.
    context_->PrepareThread();
    const dnnl::engine& eng = context_->engine;
    const Shape& s = shape_.input();
    const memory::dims dims(s.begin(), s.end());
    const memory::desc plain(dims, memory::data_type::f32,
                             memory::format_tag::nchw);
    // The blocked layout oneDNN's JIT LRN kernels take.
    const memory::desc blocked(dims, memory::data_type::f32,
                               memory::format_tag::nChw16c);
    const LrnParams& p = shape_.params;
    const memory::dim size = 2 * p.depth_radius + 1;
    const float alpha = p.alpha * static_cast<float>(size);
    dnnl::lrn_forward::primitive_desc fwd_pd(
        dnnl::lrn_forward::desc(dnnl::prop_kind::forward_training,
                                dnnl::algorithm::lrn_across_channels, blocked,
                                size, alpha, p.beta, p.bias),
        eng);
    dnnl::lrn_backward::primitive_desc bwd_pd(
        dnnl::lrn_backward::desc(dnnl::algorithm::lrn_across_channels, blocked,
                                 blocked, size, alpha, p.beta, p.bias),
        eng, fwd_pd);
    forward_ = dnnl::lrn_forward(fwd_pd);
    backward_ = dnnl::lrn_backward(bwd_pd);
    workspace_ = memory(fwd_pd.workspace_desc(), eng);
    fwd_x_ = LayoutBridge(plain, fwd_pd.src_desc(), eng, /*input=*/true);
    fwd_y_ = LayoutBridge(plain, fwd_pd.dst_desc(), eng, /*input=*/false);
    bwd_x_ = LayoutBridge(plain, bwd_pd.src_desc(), eng, true);
    bwd_dy_ = LayoutBridge(plain, bwd_pd.diff_dst_desc(), eng, true);
    bwd_dx_ = LayoutBridge(plain, bwd_pd.diff_src_desc(), eng, false);
    // What each call takes of the shared workspace (the workspace_ above is
    // the forward's record for the backward: the op's own).
    context_->workspace.Reserve(
        OneDnnWorkspace::CallBytes({fwd_x_.bytes(), fwd_y_.bytes()}));
    context_->workspace.Reserve(OneDnnWorkspace::CallBytes(
        {bwd_x_.bytes(), bwd_dy_.bytes(), bwd_dx_.bytes()}));
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<LrnOp>> CreateOneDnnLrn(const LrnShape& shape,
                                                       OneDnnContext* context) {
  RETURN_IF_ERROR(shape.Validate());
  auto op = std::make_unique<OneDnnLrn>(shape, context);
  RETURN_IF_ERROR(op->Init());
  return std::unique_ptr<LrnOp>(std::move(op));
}

}  // namespace psgd
