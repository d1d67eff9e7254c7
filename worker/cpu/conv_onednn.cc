#include "worker/cpu/conv_onednn.h"

#include <unordered_map>
#include <utility>

#include "common/status_macros.h"

namespace psgd {
namespace {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;

memory::desc Plain(const Shape& shape, Tag tag) {
  return memory::desc(memory::dims(shape.begin(), shape.end()),
                      memory::data_type::f32, tag);
}

memory::desc Any(const Shape& shape) { return Plain(shape, Tag::any); }

// What the primitive reads when it computes in bfloat16: any layout, bf16.
memory::desc AnyBf16(const Shape& shape) {
  return memory::desc(memory::dims(shape.begin(), shape.end()),
                      memory::data_type::bf16, Tag::any);
}

class OneDnnConv2d : public Conv2dOp {
 public:
  OneDnnConv2d(const Conv2dShape& shape, OneDnnContext* context,
               ConvCompute compute)
      : shape_(shape), context_(context), compute_(compute) {}

  // Builds the primitives; INTERNAL on a oneDNN error.
  absl::Status Init();

  const Conv2dShape& shape() const override { return shape_; }

 private:
  absl::Status DoForward(ConstDeviceView x, ConstDeviceView w,
                         ConstDeviceView b, DeviceView y) override {
    return CatchOneDnn(shape_.ToString() + " forward", [&] {
      context_->PrepareThread();
      dnnl::stream& s = context_->stream;
      CallSpace space(&context_->workspace);
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, fwd_x_.Input(x.data(), s, &space)},
          {DNNL_ARG_WEIGHTS, fwd_w_.Input(w.data(), s, &space)},
          {DNNL_ARG_DST, fwd_y_.Output(y.data(), &space)},
          {DNNL_ARG_SCRATCHPAD, Scratch(fwd_scratch_, &space)}};
      if (shape_.has_bias) {
        bias_.set_data_handle(const_cast<float*>(b.data()));
        args[DNNL_ARG_BIAS] = bias_;
      }
      forward_.execute(s, args);
      fwd_y_.FinishOutput(s);
      s.wait();
    });
  }

  absl::Status DoBackwardData(ConstDeviceView dy, ConstDeviceView w,
                              DeviceView dx) override {
    return CatchOneDnn(shape_.ToString() + " backward data", [&] {
      context_->PrepareThread();
      dnnl::stream& s = context_->stream;
      CallSpace space(&context_->workspace);
      backward_data_.execute(
          s, {{DNNL_ARG_DIFF_DST, bwd_dy_.Input(dy.data(), s, &space)},
              {DNNL_ARG_WEIGHTS, bwd_w_.Input(w.data(), s, &space)},
              {DNNL_ARG_DIFF_SRC, bwd_dx_.Output(dx.data(), &space)},
              {DNNL_ARG_SCRATCHPAD, Scratch(bwd_scratch_, &space)}});
      bwd_dx_.FinishOutput(s);
      s.wait();
    });
  }

  absl::Status DoBackwardFilter(ConstDeviceView x, ConstDeviceView dy,
                                DeviceView dw, DeviceView db) override {
    return CatchOneDnn(shape_.ToString() + " backward filter", [&] {
      context_->PrepareThread();
      dnnl::stream& s = context_->stream;
      CallSpace space(&context_->workspace);
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, bww_x_.Input(x.data(), s, &space)},
          {DNNL_ARG_DIFF_DST, bww_dy_.Input(dy.data(), s, &space)},
          {DNNL_ARG_DIFF_WEIGHTS, bww_dw_.Output(dw.data(), &space)},
          {DNNL_ARG_SCRATCHPAD, Scratch(bww_scratch_, &space)}};
      if (shape_.has_bias) {
        diff_bias_.set_data_handle(db.data());
        args[DNNL_ARG_DIFF_BIAS] = diff_bias_;
      }
      backward_weights_.execute(s, args);
      bww_dw_.FinishOutput(s);
      s.wait();
    });
  }

  // The scratchpad of one call, a piece of the shared workspace.
  static const memory& Scratch(memory& scratch, CallSpace* space) {
    scratch.set_data_handle(space->Take(scratch.get_desc().get_size()));
    return scratch;
  }

  const Conv2dShape shape_;
  OneDnnContext* const context_;  // Not owned.
  const ConvCompute compute_;

  dnnl::convolution_forward forward_;
  dnnl::convolution_backward_data backward_data_;
  dnnl::convolution_backward_weights backward_weights_;
  memory fwd_scratch_, bwd_scratch_, bww_scratch_;
  memory bias_, diff_bias_;
  LayoutBridge fwd_x_, fwd_w_, fwd_y_;
  LayoutBridge bwd_dy_, bwd_w_, bwd_dx_;
  LayoutBridge bww_x_, bww_dy_, bww_dw_;
};

absl::Status OneDnnConv2d::Init() {
  return CatchOneDnn(shape_.ToString() + " plan", [&] {
    // Primitives take their thread count when they are made: the
    // context's, not OpenMP's default of one per core.
    context_->PrepareThread();
    const dnnl::engine& eng = context_->engine;
    const memory::desc x_md =
        Plain(shape_.input(), ActivationTag(shape_.in_block));
    const memory::desc w_md = Plain(shape_.filter(), Tag::oihw);
    // Without a bias, a zero-sized descriptor: oneDNN's "no bias".
    const memory::desc b_md =
        shape_.has_bias ? Plain(shape_.bias(), Tag::x) : memory::desc();
    const memory::desc y_md =
        Plain(shape_.output(), ActivationTag(shape_.out_block));
    const SamePadding ph = shape_.pad_h();
    const SamePadding pw = shape_.pad_w();
    const memory::dims strides = {shape_.stride, shape_.stride};
    const memory::dims pad_l = {ph.before, pw.before};
    const memory::dims pad_r = {ph.after, pw.after};
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

    const auto algo = dnnl::algorithm::convolution_direct;
    // In bfloat16 compute each call's bridges round what the primitive
    // reads (x and w; dy and w; x and dy) to bfloat16 and it accumulates and
    // writes float32 (y; dx; dw and db): the caller's tensors stay float32
    // either way.
    const auto in = compute_ == ConvCompute::kBfloat16 ? &AnyBf16 : &Any;
    auto fwd_desc = [&](dnnl::prop_kind kind) {
      return dnnl::convolution_forward::desc(
          kind, algo, in(shape_.input()), in(shape_.filter()), b_md,
          Any(shape_.output()), strides, pad_l, pad_r);
    };
    // The backward's hint: the training forward, without post-ops.
    const dnnl::convolution_forward::primitive_desc hint_pd(
        fwd_desc(dnnl::prop_kind::forward_training), attr, eng);
    dnnl::convolution_forward::primitive_desc fwd_pd = hint_pd;
    if (shape_.relu) {
      // A fused ReLU is a post-op of the forward, applied to each output as
      // it is written (an inference forward: the fold's).
      dnnl::post_ops relu;
      relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      // Its own attributes: a copy of `attr` would share them.
      dnnl::primitive_attr fwd_attr;
      fwd_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      fwd_attr.set_post_ops(relu);
      // On the training forward's activation layouts: left to choose,
      // oneDNN takes channels-last here, and every call would reorder the
      // blocked activations in and out.
      fwd_pd = dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(
              dnnl::prop_kind::forward_inference, algo, hint_pd.src_desc(),
              in(shape_.filter()), b_md, hint_pd.dst_desc(), strides, pad_l,
              pad_r),
          fwd_attr, eng);
    }
    dnnl::convolution_backward_data::primitive_desc bwd_pd(
        dnnl::convolution_backward_data::desc(
            algo, Any(shape_.input()), in(shape_.filter()), in(shape_.output()),
            strides, pad_l, pad_r),
        attr, eng, hint_pd);
    dnnl::convolution_backward_weights::primitive_desc bww_pd(
        dnnl::convolution_backward_weights::desc(
            algo, in(shape_.input()), Any(shape_.filter()), b_md,
            in(shape_.output()), strides, pad_l, pad_r),
        attr, eng, hint_pd);

    forward_ = dnnl::convolution_forward(fwd_pd);
    backward_data_ = dnnl::convolution_backward_data(bwd_pd);
    backward_weights_ = dnnl::convolution_backward_weights(bww_pd);
    fwd_scratch_ = memory(fwd_pd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
    bwd_scratch_ = memory(bwd_pd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
    bww_scratch_ = memory(bww_pd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
    if (shape_.has_bias) {
      bias_ = memory(b_md, eng, DNNL_MEMORY_NONE);
      diff_bias_ = memory(b_md, eng, DNNL_MEMORY_NONE);
    }

    fwd_x_ = LayoutBridge(x_md, fwd_pd.src_desc(), eng, /*input=*/true);
    fwd_w_ = LayoutBridge(w_md, fwd_pd.weights_desc(), eng, true);
    fwd_y_ = LayoutBridge(y_md, fwd_pd.dst_desc(), eng, /*input=*/false);
    bwd_dy_ = LayoutBridge(y_md, bwd_pd.diff_dst_desc(), eng, true);
    bwd_w_ = LayoutBridge(w_md, bwd_pd.weights_desc(), eng, true);
    bwd_dx_ = LayoutBridge(x_md, bwd_pd.diff_src_desc(), eng, false);
    bww_x_ = LayoutBridge(x_md, bww_pd.src_desc(), eng, true);
    bww_dy_ = LayoutBridge(y_md, bww_pd.diff_dst_desc(), eng, true);
    bww_dw_ = LayoutBridge(w_md, bww_pd.diff_weights_desc(), eng, false);
    // What each call takes of the shared workspace, in the order it takes
    // it.
    OneDnnWorkspace& ws = context_->workspace;
    ws.Reserve(OneDnnWorkspace::CallBytes(
        {fwd_x_.bytes(), fwd_w_.bytes(), fwd_y_.bytes(),
         fwd_pd.scratchpad_desc().get_size()}));
    ws.Reserve(OneDnnWorkspace::CallBytes(
        {bwd_dy_.bytes(), bwd_w_.bytes(), bwd_dx_.bytes(),
         bwd_pd.scratchpad_desc().get_size()}));
    ws.Reserve(OneDnnWorkspace::CallBytes(
        {bww_x_.bytes(), bww_dy_.bytes(), bww_dw_.bytes(),
         bww_pd.scratchpad_desc().get_size()}));
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateOneDnnConv2d(
    const Conv2dShape& shape, OneDnnContext* context, ConvCompute compute) {
  RETURN_IF_ERROR(shape.Validate());
  auto op = std::make_unique<OneDnnConv2d>(shape, context, compute);
  RETURN_IF_ERROR(op->Init());
  return std::unique_ptr<Conv2dOp>(std::move(op));
}

}  // namespace psgd
