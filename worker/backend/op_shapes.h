// The shapes and constants of the backend's ops, as plain values: what a plan
// (Backend::CreateConv2d, ...) is created for. Layouts are NCHW for
// activations (or channel-blocked where a shape says so, see
// ValidateChannelBlock), OIHW for convolution filters and (inputs, outputs)
// for dense weights. Padding follows TensorFlow's "SAME".
//
// Thread-safety: plain values and pure functions.
#ifndef PSGD_WORKER_BACKEND_OP_SHAPES_H_
#define PSGD_WORKER_BACKEND_OP_SHAPES_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/tensor.h"

namespace psgd {

// TensorFlow's SAME padding along one spatial dimension: output =
// ceil(input / stride), and the padding that needs, with the odd element
// after (bottom / right).
// Activation layouts. A channel block of 0 is NCHW; b > 0 is the channels in
// blocks of b innermost, (N, C / b, H, W, b) (oneDNN's nChw8c / nChw16c, the
// layout its CPU convolutions and batch norm run fastest on), with C a
// multiple of b. A view's shape stays the logical (N, C, H, W) either way;
// element-wise ops (add, ReLU, copy) do not care which, as long as their
// operands agree. Backend::ChannelBlock says which block a backend's ops
// take. INVALID_ARGUMENT naming `op` unless `block` is 0, 8 or 16 and divides
// `channels`.
absl::Status ValidateChannelBlock(absl::string_view op, int64_t channels,
                                  int64_t block);
// The largest valid channel block of at most `block` that divides
// `channels`: `block` itself, 8 for a block of 16 that does not divide
// them (24 channels), or 0 (NCHW: 12 channels).
int64_t LargestChannelBlock(int64_t channels, int64_t block);

struct SamePadding {
  int64_t output = 0;
  int64_t before = 0;
  int64_t after = 0;
};
SamePadding ComputeSamePadding(int64_t input, int64_t window, int64_t stride);

// 2-D convolution. By default stride 1, SAME padding and a bias per output
// channel (the tutorial network's form, which every backend runs); the
// ResNets' form is a stride, symmetric zero padding (PyTorch's `padding`)
// and no bias, which the oneDNN and cuDNN convolutions run and the im2col
// one refuses with UNIMPLEMENTED (see default_form()).
struct Conv2dShape {
  static constexpr int64_t kSamePadding = -1;

  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t out_channels = 0;
  int64_t kernel_h = 0;
  int64_t kernel_w = 0;
  int64_t stride = 1;
  // Zero rows and columns on each side, or kSamePadding for TensorFlow's SAME
  // (the odd one after).
  int64_t padding = kSamePadding;
  // Without a bias, b and db are empty views (shape []) and ignored.
  bool has_bias = true;
  // The layouts of x and dx (in_block), y and dy (out_block): see
  // ValidateChannelBlock.
  int64_t in_block = 0;
  int64_t out_block = 0;
  // Forward applies max(y, 0) after the bias: a ReLU fused into the
  // convolution (the inference fold of convolution + batch norm + ReLU,
  // worker/models/network_model.h). The backward calls are the
  // convolution's alone.
  bool relu = false;

  // Stride 1, SAME, with a bias.
  bool default_form() const {
    return stride == 1 && padding == kSamePadding && has_bias;
  }
  // The output size and padding along each spatial dimension.
  SamePadding pad_h() const;
  SamePadding pad_w() const;
  Shape input() const { return {batch, in_channels, height, width}; }
  Shape filter() const {
    return {out_channels, in_channels, kernel_h, kernel_w};
  }
  Shape bias() const { return has_bias ? Shape{out_channels} : Shape{}; }
  Shape output() const {
    return {batch, out_channels, pad_h().output, pad_w().output};
  }
  std::string ToString() const;
  absl::Status Validate() const;
  // The shapes of each call's arguments against the plan: INVALID_ARGUMENT
  // naming the first that differs (as CheckShape).
  absl::Status CheckForward(const Shape& x, const Shape& w, const Shape& b,
                            const Shape& y) const;
  absl::Status CheckBackwardData(const Shape& dy, const Shape& w,
                                 const Shape& dx) const;
  absl::Status CheckBackwardFilter(const Shape& x, const Shape& dy,
                                   const Shape& dw, const Shape& db) const;
};

// Max pooling over window x window, stride `stride`, SAME padding (padded
// positions never win).
struct PoolShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t window = 3;
  int64_t stride = 2;
  int64_t channel_block = 0;  // x, y, dy, dx: see ValidateChannelBlock

  Shape input() const { return {batch, channels, height, width}; }
  Shape output() const;
  std::string ToString() const;
  absl::Status Validate() const;
  absl::Status CheckForward(const Shape& x, const Shape& y) const;
  absl::Status CheckBackward(const Shape& x, const Shape& y, const Shape& dy,
                             const Shape& dx) const;
};

// Local response normalisation across channels, TensorFlow's definition:
//   sqr_sum[n,c,h,w] = sum over c' in [c - depth_radius, c + depth_radius]
//                      (clipped to the channels) of x[n,c',h,w]^2
//   y = x / (bias + alpha * sqr_sum)^beta
// The defaults are the cifar10 tutorial's (alpha is not divided by the window
// size, unlike PyTorch's and oneDNN's).
struct LrnParams {
  int64_t depth_radius = 4;
  float bias = 1.0f;
  float alpha = 0.001f / 9.0f;
  float beta = 0.75f;
};

struct LrnShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  LrnParams params;

  Shape input() const { return {batch, channels, height, width}; }
  std::string ToString() const;
  absl::Status Validate() const;
  absl::Status CheckForward(const Shape& x, const Shape& y) const;
  absl::Status CheckBackward(const Shape& x, const Shape& y, const Shape& dy,
                             const Shape& dx) const;
};

// Batch normalisation over (N, H, W) per channel, PyTorch's BatchNorm2d:
//   training:  y = gamma * (x - mean) / sqrt(var + epsilon) + beta with the
//              batch's mean and biased variance; running_mean and
//              running_var move towards the batch's mean and unbiased
//              variance: r = (1 - momentum) * r + momentum * batch_stat.
//   inference: the same with running_mean and running_var.
// With `relu`, y = max(that, 0) (the fused BN + ReLU of a conv block).
struct BatchNormShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  float epsilon = 1e-5f;
  float momentum = 0.1f;
  bool relu = false;
  int64_t channel_block = 0;  // x, y, dy, dx: see ValidateChannelBlock

  Shape input() const { return {batch, channels, height, width}; }
  Shape params() const { return {channels}; }
  std::string ToString() const;
  absl::Status Validate() const;
  // INVALID_ARGUMENT naming `what` unless it has input()'s shape /
  // params()'s shape.
  absl::Status CheckInput(absl::string_view what, const Shape& got) const;
  absl::Status CheckParams(absl::string_view what, const Shape& got) const;
  // The arguments of each BatchNormOp call (backend.h), the first that
  // differs named: activations input()'s shape, the rest params()'s; y of
  // the backward only with relu (its mask).
  absl::Status CheckForwardTraining(const Shape& x, const Shape& gamma,
                                    const Shape& beta, const Shape& y,
                                    const Shape& batch_mean,
                                    const Shape& batch_var,
                                    const Shape& running_mean,
                                    const Shape& running_var) const;
  absl::Status CheckForwardInference(const Shape& x, const Shape& gamma,
                                     const Shape& beta,
                                     const Shape& running_mean,
                                     const Shape& running_var,
                                     const Shape& y) const;
  absl::Status CheckBackward(const Shape& x, const Shape& y, const Shape& dy,
                             const Shape& gamma, const Shape& batch_mean,
                             const Shape& batch_var, const Shape& dx,
                             const Shape& dgamma, const Shape& dbeta) const;

 private:
  using Arg = std::pair<const char*, const Shape*>;
  absl::Status CheckArgs(std::initializer_list<Arg> activations,
                         std::initializer_list<Arg> params) const;
};

// Fully connected: y (N, M) = x (N, K) . w (K, M) + b (M).
struct DenseShape {
  int64_t batch = 0;
  int64_t inputs = 0;
  int64_t outputs = 0;

  Shape input() const { return {batch, inputs}; }
  Shape weights() const { return {inputs, outputs}; }
  Shape bias() const { return {outputs}; }
  Shape output() const { return {batch, outputs}; }
  std::string ToString() const;
  absl::Status Validate() const;
  absl::Status CheckForward(const Shape& x, const Shape& w, const Shape& b,
                            const Shape& y) const;
  absl::Status CheckBackwardData(const Shape& dy, const Shape& w,
                                 const Shape& dx) const;
  absl::Status CheckBackwardWeights(const Shape& x, const Shape& dy,
                                    const Shape& dw, const Shape& db) const;
};

// Softmax cross-entropy of logits (N, classes) against integer labels.
struct SoftmaxCrossEntropyShape {
  int64_t batch = 0;
  int64_t classes = 0;

  Shape logits() const { return {batch, classes}; }
  std::string ToString() const;
  absl::Status Validate() const;
  absl::Status CheckRun(const Shape& logits, const Shape& dlogits) const;
  // INVALID_ARGUMENT unless there are `batch` labels, each in [0, classes).
  absl::Status CheckLabels(absl::Span<const int32_t> labels) const;
};

// INVALID_ARGUMENT "<op> <what>: shape [..] but the plan is for [..]" unless
// `got` equals `want`.
absl::Status CheckShape(absl::string_view op, absl::string_view what,
                        const Shape& got, const Shape& want);

// The element-wise ops' checks, shared by every backend: INVALID_ARGUMENT
// "<op>: shapes [..] and [..] differ" / "<op>: A elements into B".
absl::Status CheckSameShape(absl::string_view op, const Shape& a,
                            const Shape& b);
absl::Status CheckSameCount(absl::string_view op, int64_t a, int64_t b);
// Global average pooling's: x (N, C, H, W) in the layout of `channel_block`
// and y (N, C), or INVALID_ARGUMENT.
absl::Status CheckGlobalAvgPool(const Shape& x, const Shape& y,
                                int64_t channel_block);

}  // namespace psgd

#endif  // PSGD_WORKER_BACKEND_OP_SHAPES_H_
