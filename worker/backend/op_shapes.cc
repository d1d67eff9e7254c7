#include "worker/backend/op_shapes.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace {

// INVALID_ARGUMENT naming the op and the first dimension that is not
// positive.
absl::Status CheckPositive(
    absl::string_view op,
    std::initializer_list<std::pair<const char*, int64_t>> dims) {
  for (const auto& [name, value] : dims) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " is ", value, ", must be positive"));
    }
  }
  return absl::OkStatus();
}

// CheckPositive of an image tensor's four dimensions.
absl::Status CheckImageDims(absl::string_view op, int64_t batch,
                            int64_t channels, int64_t height, int64_t width) {
  return CheckPositive(op, {{"batch", batch},
                            {"channels", channels},
                            {"height", height},
                            {"width", width}});
}

// One argument of an op call: its name, its shape and the plan's.
struct ArgShape {
  const char* name;
  const Shape& got;
  const Shape& want;
};

// CheckShape for each argument of a call on `plan`; the plan's ToString()
// names the op, built only on a mismatch.
template <typename PlanShape>
absl::Status CheckShapes(const PlanShape& plan,
                         std::initializer_list<ArgShape> args) {
  for (const ArgShape& a : args) {
    if (a.got != a.want)
      return CheckShape(plan.ToString(), a.name, a.got, a.want);
  }
  return absl::OkStatus();
}

}  // namespace

SamePadding ComputeSamePadding(int64_t input, int64_t window, int64_t stride) {
  SamePadding p;
  p.output = (input + stride - 1) / stride;
  int64_t total =
      std::max<int64_t>((p.output - 1) * stride + window - input, 0);
  p.before = total / 2;
  p.after = total - p.before;
  return p;
}

namespace {

SamePadding ConvPadding(int64_t input, int64_t window, int64_t stride,
                        int64_t padding) {
  if (padding == Conv2dShape::kSamePadding) {
    return ComputeSamePadding(input, window, stride);
  }
  SamePadding p;
  p.before = padding;
  p.after = padding;
  p.output = (input + 2 * padding - window) / stride + 1;
  return p;
}

}  // namespace

SamePadding Conv2dShape::pad_h() const {
  return ConvPadding(height, kernel_h, stride, padding);
}

SamePadding Conv2dShape::pad_w() const {
  return ConvPadding(width, kernel_w, stride, padding);
}

std::string Conv2dShape::ToString() const {
  std::string s = absl::StrCat("conv2d x ", ShapeToString(input()), " w ",
                               ShapeToString(filter()));
  if (!default_form()) {
    absl::StrAppend(
        &s, " stride ", stride, " padding ",
        padding == kSamePadding ? std::string("same") : absl::StrCat(padding),
        has_bias ? "" : " no bias");
  }
  if (relu) absl::StrAppend(&s, " relu");
  if (in_block != 0 || out_block != 0) {
    absl::StrAppend(&s, " blocks ", in_block, "/", out_block);
  }
  return s;
}

absl::Status Conv2dShape::Validate() const {
  if (absl::Status s =
          CheckPositive(ToString(), {{"batch", batch},
                                     {"in_channels", in_channels},
                                     {"height", height},
                                     {"width", width},
                                     {"out_channels", out_channels},
                                     {"kernel_h", kernel_h},
                                     {"kernel_w", kernel_w},
                                     {"stride", stride}});
      !s.ok()) {
    return s;
  }
  if (padding < kSamePadding) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToString(), ": padding is ", padding, ", must be -1 (SAME) or more"));
  }
  if (absl::Status s =
          ValidateChannelBlock(ToString() + " input", in_channels, in_block);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateChannelBlock(ToString() + " output", out_channels, out_block);
      !s.ok()) {
    return s;
  }
  return CheckPositive(ToString(), {{"output height", pad_h().output},
                                    {"output width", pad_w().output}});
}

std::string BatchNormShape::ToString() const {
  return absl::StrCat(
      "batch_norm", relu ? "+relu" : "", " x ", ShapeToString(input()),
      channel_block != 0 ? absl::StrCat(" block ", channel_block)
                         : std::string());
}

absl::Status BatchNormShape::Validate() const {
  if (absl::Status s =
          CheckImageDims(ToString(), batch, channels, height, width);
      !s.ok()) {
    return s;
  }
  if (!(epsilon > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToString(), ": needs epsilon > 0 and momentum in [0, 1], got ", epsilon,
        " and ", momentum));
  }
  return ValidateChannelBlock(ToString(), channels, channel_block);
}

absl::Status BatchNormShape::CheckInput(absl::string_view what,
                                        const Shape& got) const {
  if (got == input()) return absl::OkStatus();
  return CheckShape(ToString(), what, got, input());
}

absl::Status BatchNormShape::CheckParams(absl::string_view what,
                                         const Shape& got) const {
  if (got == params()) return absl::OkStatus();
  return CheckShape(ToString(), what, got, params());
}

absl::Status BatchNormShape::CheckArgs(
    std::initializer_list<Arg> activations,
    std::initializer_list<Arg> params) const {
  for (const auto& [what, got] : activations) {
    if (absl::Status s = CheckInput(what, *got); !s.ok()) return s;
  }
  for (const auto& [what, got] : params) {
    if (absl::Status s = CheckParams(what, *got); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BatchNormShape::CheckForwardTraining(
    const Shape& x, const Shape& gamma, const Shape& beta, const Shape& y,
    const Shape& batch_mean, const Shape& batch_var, const Shape& running_mean,
    const Shape& running_var) const {
  return CheckArgs({{"x", &x}, {"y", &y}}, {{"gamma", &gamma},
                                            {"beta", &beta},
                                            {"batch_mean", &batch_mean},
                                            {"batch_var", &batch_var},
                                            {"running_mean", &running_mean},
                                            {"running_var", &running_var}});
}

absl::Status BatchNormShape::CheckForwardInference(
    const Shape& x, const Shape& gamma, const Shape& beta,
    const Shape& running_mean, const Shape& running_var, const Shape& y) const {
  return CheckArgs({{"x", &x}, {"y", &y}}, {{"gamma", &gamma},
                                            {"beta", &beta},
                                            {"running_mean", &running_mean},
                                            {"running_var", &running_var}});
}

absl::Status BatchNormShape::CheckBackward(const Shape& x, const Shape& y,
                                           const Shape& dy, const Shape& gamma,
                                           const Shape& batch_mean,
                                           const Shape& batch_var,
                                           const Shape& dx, const Shape& dgamma,
                                           const Shape& dbeta) const {
  if (absl::Status s = CheckArgs({{"x", &x}, {"dy", &dy}, {"dx", &dx}},
                                 {{"gamma", &gamma},
                                  {"batch_mean", &batch_mean},
                                  {"batch_var", &batch_var},
                                  {"dgamma", &dgamma},
                                  {"dbeta", &dbeta}});
      !s.ok()) {
    return s;
  }
  return relu ? CheckInput("y", y) : absl::OkStatus();
}

Shape PoolShape::output() const {
  return {batch, channels, ComputeSamePadding(height, window, stride).output,
          ComputeSamePadding(width, window, stride).output};
}

std::string PoolShape::ToString() const {
  return absl::StrCat("max_pool ", window, "x", window, "/", stride, " x ",
                      ShapeToString(input()),
                      channel_block != 0
                          ? absl::StrCat(" block ", channel_block)
                          : std::string());
}

absl::Status PoolShape::Validate() const {
  if (absl::Status s = CheckPositive(ToString(), {{"batch", batch},
                                                  {"channels", channels},
                                                  {"height", height},
                                                  {"width", width},
                                                  {"window", window},
                                                  {"stride", stride}});
      !s.ok()) {
    return s;
  }
  return ValidateChannelBlock(ToString(), channels, channel_block);
}

std::string LrnShape::ToString() const {
  return absl::StrCat("lrn(r=", params.depth_radius, ", bias=", params.bias,
                      ", alpha=", params.alpha, ", beta=", params.beta, ") x ",
                      ShapeToString(input()));
}

absl::Status LrnShape::Validate() const {
  if (absl::Status s =
          CheckImageDims(ToString(), batch, channels, height, width);
      !s.ok()) {
    return s;
  }
  if (params.depth_radius < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToString(), ": depth_radius must not be negative"));
  }
  if (!(params.bias > 0.0f) || !(params.alpha >= 0.0f) ||
      !(params.beta >= 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToString(), ": needs bias > 0, alpha >= 0 and beta >= 0"));
  }
  return absl::OkStatus();
}

std::string DenseShape::ToString() const {
  return absl::StrCat("dense x ", ShapeToString(input()), " w ",
                      ShapeToString(weights()));
}

absl::Status DenseShape::Validate() const {
  return CheckPositive(
      ToString(), {{"batch", batch}, {"inputs", inputs}, {"outputs", outputs}});
}

std::string SoftmaxCrossEntropyShape::ToString() const {
  return absl::StrCat("softmax_cross_entropy logits ", ShapeToString(logits()));
}

absl::Status SoftmaxCrossEntropyShape::Validate() const {
  return CheckPositive(ToString(), {{"batch", batch}, {"classes", classes}});
}

absl::Status Conv2dShape::CheckForward(const Shape& x, const Shape& w,
                                       const Shape& b, const Shape& y) const {
  return CheckShapes(*this, {{"x", x, input()},
                             {"w", w, filter()},
                             {"b", b, bias()},
                             {"y", y, output()}});
}

absl::Status Conv2dShape::CheckBackwardData(const Shape& dy, const Shape& w,
                                            const Shape& dx) const {
  return CheckShapes(
      *this, {{"dy", dy, output()}, {"w", w, filter()}, {"dx", dx, input()}});
}

absl::Status Conv2dShape::CheckBackwardFilter(const Shape& x, const Shape& dy,
                                              const Shape& dw,
                                              const Shape& db) const {
  return CheckShapes(*this, {{"x", x, input()},
                             {"dy", dy, output()},
                             {"dw", dw, filter()},
                             {"db", db, bias()}});
}

absl::Status PoolShape::CheckForward(const Shape& x, const Shape& y) const {
  return CheckShapes(*this, {{"x", x, input()}, {"y", y, output()}});
}

absl::Status PoolShape::CheckBackward(const Shape& x, const Shape& y,
                                      const Shape& dy, const Shape& dx) const {
  return CheckShapes(*this, {{"x", x, input()},
                             {"y", y, output()},
                             {"dy", dy, output()},
                             {"dx", dx, input()}});
}

absl::Status LrnShape::CheckForward(const Shape& x, const Shape& y) const {
  return CheckShapes(*this, {{"x", x, input()}, {"y", y, input()}});
}

absl::Status LrnShape::CheckBackward(const Shape& x, const Shape& y,
                                     const Shape& dy, const Shape& dx) const {
  return CheckShapes(*this, {{"x", x, input()},
                             {"y", y, input()},
                             {"dy", dy, input()},
                             {"dx", dx, input()}});
}

absl::Status DenseShape::CheckForward(const Shape& x, const Shape& w,
                                      const Shape& b, const Shape& y) const {
  return CheckShapes(*this, {{"x", x, input()},
                             {"w", w, weights()},
                             {"b", b, bias()},
                             {"y", y, output()}});
}

absl::Status DenseShape::CheckBackwardData(const Shape& dy, const Shape& w,
                                           const Shape& dx) const {
  return CheckShapes(
      *this, {{"dy", dy, output()}, {"w", w, weights()}, {"dx", dx, input()}});
}

absl::Status DenseShape::CheckBackwardWeights(const Shape& x, const Shape& dy,
                                              const Shape& dw,
                                              const Shape& db) const {
  return CheckShapes(*this, {{"x", x, input()},
                             {"dy", dy, output()},
                             {"dw", dw, weights()},
                             {"db", db, bias()}});
}

absl::Status SoftmaxCrossEntropyShape::CheckRun(const Shape& logits_shape,
                                                const Shape& dlogits) const {
  return CheckShapes(*this, {{"logits", logits_shape, logits()},
                             {"dlogits", dlogits, logits()}});
}

absl::Status SoftmaxCrossEntropyShape::CheckLabels(
    absl::Span<const int32_t> labels) const {
  if (static_cast<int64_t>(labels.size()) != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("softmax_cross_entropy: ", labels.size(),
                     " labels for a batch of ", batch));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("softmax_cross_entropy: label ", labels[i],
                       " of example ", i, " is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckShape(absl::string_view op, absl::string_view what,
                        const Shape& got, const Shape& want) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, " ", what, ": shape ", ShapeToString(got),
                   " but the plan is for ", ShapeToString(want)));
}

absl::Status CheckSameShape(absl::string_view op, const Shape& a,
                            const Shape& b) {
  if (a == b) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": shapes ", ShapeToString(a), " and ", ShapeToString(b), " differ"));
}

absl::Status CheckSameCount(absl::string_view op, int64_t a, int64_t b) {
  if (a == b) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", a, " elements into ", b));
}

absl::Status CheckGlobalAvgPool(const Shape& x, const Shape& y,
                                int64_t channel_block) {
  if (x.size() == 4 && y.size() == 2 && x[0] == y[0] && x[1] == y[1]) {
    return ValidateChannelBlock("global average pooling", x[1], channel_block);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("global average pooling: x ", ShapeToString(x), " and y ",
                   ShapeToString(y), " are not (N, C, H, W) and (N, C)"));
}

int64_t LargestChannelBlock(int64_t channels, int64_t block) {
  for (int64_t b : {int64_t{16}, int64_t{8}}) {
    if (b <= block && channels > 0 && channels % b == 0) return b;
  }
  return 0;
}

absl::Status ValidateChannelBlock(absl::string_view op, int64_t channels,
                                  int64_t block) {
  if (block == 0) return absl::OkStatus();
  if ((block == 8 || block == 16) && channels > 0 && channels % block == 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": a channel block of ", block, " for ", channels,
      " channels; the block must be 0 (NCHW), 8 or 16 and divide the "
      "channels"));
}

}  // namespace psgd
