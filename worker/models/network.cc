#include "worker/models/network.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psgd {

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kInput:
      return "input";
    case LayerKind::kConv:
      return "conv";
    case LayerKind::kBatchNorm:
      return "batch_norm";
    case LayerKind::kRelu:
      return "relu";
    case LayerKind::kAdd:
      return "add";
    case LayerKind::kMaxPool:
      return "max_pool";
    case LayerKind::kGlobalAvgPool:
      return "global_avg_pool";
    case LayerKind::kDense:
      return "dense";
  }
  return "unknown";
}

Conv2dShape ConvShapeOf(const Layer& conv, int64_t batch, const Shape& in) {
  Conv2dShape s{batch,         in[0],       in[1],      in[2],
                conv.shape[0], conv.kernel, conv.kernel};
  s.stride = conv.stride;
  s.padding = conv.padding;
  s.has_bias = conv.bias;
  return s;
}

BatchNormShape BatchNormShapeOf(int64_t batch, const Shape& in) {
  BatchNormShape s;
  s.batch = batch;
  s.channels = in[0];
  s.height = in[1];
  s.width = in[2];
  return s;
}

NetworkBuilder::NetworkBuilder(std::string name, Shape image, int64_t classes,
                               float weight_decay) {
  spec_.name = std::move(name);
  spec_.image = image;
  spec_.classes = classes;
  spec_.weight_decay = weight_decay;
  Layer in;
  in.kind = LayerKind::kInput;
  in.shape = std::move(image);
  spec_.layers.push_back(std::move(in));
  if (spec_.image.size() != 3 || !ValidateShape(spec_.image).ok()) {
    Fail(absl::StrCat("image shape ", ShapeToString(spec_.image),
                      " is not (C, H, W)"));
  }
}

const Shape& NetworkBuilder::shape(int layer) const {
  static const Shape* const kNone = new Shape();
  if (layer < 0 || layer >= static_cast<int>(spec_.layers.size())) {
    return *kNone;
  }
  return spec_.layers[layer].shape;
}

void NetworkBuilder::Fail(const std::string& message) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(absl::StrCat(
        spec_.name, " layer ", spec_.layers.size(), ": ", message));
  }
}

int NetworkBuilder::Append(Layer layer) {
  if (!status_.ok()) return -1;
  for (int in : layer.inputs) {
    if (in < 0 || in >= static_cast<int>(spec_.layers.size())) {
      Fail(absl::StrCat("input ", in, " is not an earlier layer"));
      return -1;
    }
  }
  if (!ValidateShape(layer.shape).ok()) {
    Fail(absl::StrCat("output shape ", ShapeToString(layer.shape),
                      " is not valid"));
    return -1;
  }
  spec_.layers.push_back(std::move(layer));
  return static_cast<int>(spec_.layers.size()) - 1;
}

int NetworkBuilder::Conv(int x, const std::string& name, int64_t out_channels,
                         int64_t kernel, int64_t stride, int64_t padding,
                         bool bias) {
  const Shape& in = shape(x);
  if (status_.ok() && (in.size() != 3 || kernel <= 0 || stride <= 0 ||
                       padding < 0 || out_channels <= 0)) {
    Fail(absl::StrCat("conv ", name, " on ", ShapeToString(in), " kernel ",
                      kernel, " stride ", stride, " padding ", padding));
  }
  if (!status_.ok()) return -1;
  Layer l;
  l.kind = LayerKind::kConv;
  l.name = name;
  l.inputs = {x};
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  l.bias = bias;
  l.shape = {out_channels, (in[1] + 2 * padding - kernel) / stride + 1,
             (in[2] + 2 * padding - kernel) / stride + 1};
  l.variable = static_cast<int>(spec_.variables.size());
  const Shape filter = {out_channels, in[0], kernel, kernel};
  const int at = Append(std::move(l));
  if (at < 0) return at;
  spec_.decayed.push_back(static_cast<int>(spec_.variables.size()));
  spec_.variables.push_back(
      {name + ".weight", filter,
       Initializer::TruncatedNormal(static_cast<float>(std::sqrt(
           2.0 / static_cast<double>(kernel * kernel * out_channels))))});
  if (bias) {
    spec_.variables.push_back(
        {name + ".bias", {out_channels}, Initializer::Constant(0.0f)});
  }
  return at;
}

int NetworkBuilder::BatchNorm(int x, const std::string& name) {
  const Shape& in = shape(x);
  if (status_.ok() && in.size() != 3) {
    Fail(absl::StrCat("batch_norm ", name, " on ", ShapeToString(in)));
  }
  if (!status_.ok()) return -1;
  Layer l;
  l.kind = LayerKind::kBatchNorm;
  l.name = name;
  l.inputs = {x};
  l.shape = in;
  l.variable = static_cast<int>(spec_.variables.size());
  l.state = static_cast<int>(spec_.state.size());
  const int64_t c = in[0];
  const int at = Append(std::move(l));
  if (at < 0) return at;
  spec_.variables.push_back({name + ".weight", {c}, Initializer::Constant(1)});
  spec_.variables.push_back({name + ".bias", {c}, Initializer::Constant(0)});
  spec_.state.push_back({name + ".running_mean",
                         {c},
                         Initializer::Constant(0),
                         VariableKind::kRunningStatistic});
  spec_.state.push_back({name + ".running_var",
                         {c},
                         Initializer::Constant(1),
                         VariableKind::kRunningStatistic});
  return at;
}

int NetworkBuilder::Relu(int x) {
  Layer l;
  l.kind = LayerKind::kRelu;
  l.inputs = {x};
  l.shape = shape(x);
  return Append(std::move(l));
}

int NetworkBuilder::Add(int a, int b) {
  if (status_.ok() && shape(a) != shape(b)) {
    Fail(absl::StrCat("add of ", ShapeToString(shape(a)), " and ",
                      ShapeToString(shape(b))));
  }
  Layer l;
  l.kind = LayerKind::kAdd;
  l.inputs = {a, b};
  l.shape = shape(a);
  return Append(std::move(l));
}

int NetworkBuilder::MaxPool(int x, int64_t window, int64_t stride) {
  const Shape& in = shape(x);
  if (status_.ok() && (in.size() != 3 || window <= 0 || stride <= 0)) {
    Fail(absl::StrCat("max_pool on ", ShapeToString(in)));
  }
  if (!status_.ok()) return -1;
  Layer l;
  l.kind = LayerKind::kMaxPool;
  l.inputs = {x};
  l.kernel = window;
  l.stride = stride;
  l.shape = {in[0], (in[1] + stride - 1) / stride,
             (in[2] + stride - 1) / stride};
  return Append(std::move(l));
}

int NetworkBuilder::GlobalAvgPool(int x) {
  const Shape& in = shape(x);
  if (status_.ok() && in.size() != 3) {
    Fail(absl::StrCat("global_avg_pool on ", ShapeToString(in)));
  }
  if (!status_.ok()) return -1;
  Layer l;
  l.kind = LayerKind::kGlobalAvgPool;
  l.inputs = {x};
  l.shape = {in[0]};
  return Append(std::move(l));
}

int NetworkBuilder::Dense(int x, const std::string& name, int64_t outputs) {
  const int64_t inputs = NumElements(shape(x));
  Layer l;
  l.kind = LayerKind::kDense;
  l.name = name;
  l.inputs = {x};
  l.shape = {outputs};
  l.variable = static_cast<int>(spec_.variables.size());
  const int at = Append(std::move(l));
  if (at < 0) return at;
  spec_.decayed.push_back(static_cast<int>(spec_.variables.size()));
  spec_.variables.push_back(
      {name + ".weight",
       {inputs, outputs},
       Initializer::TruncatedNormal(
           static_cast<float>(1.0 / std::sqrt(static_cast<double>(inputs))))});
  spec_.variables.push_back(
      {name + ".bias", {outputs}, Initializer::Constant(0.0f)});
  return at;
}

absl::StatusOr<NetworkSpec> NetworkBuilder::Build() && {
  if (!status_.ok()) return status_;
  if (spec_.layers.back().shape != Shape{spec_.classes}) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec_.name, ": the last layer's output is ",
                     ShapeToString(spec_.layers.back().shape),
                     ", not the logits [", spec_.classes, "]"));
  }
  std::vector<VariableSpec> all = spec_.variables;
  all.insert(all.end(), spec_.state.begin(), spec_.state.end());
  if (absl::Status s = ValidateVariableSpecs(all); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec_.name, ": ", s.message()));
  }
  return std::move(spec_);
}

std::vector<int64_t> ChooseLayouts(const std::vector<Layer>& layers,
                                   int64_t block) {
  const int count = static_cast<int>(layers.size());
  std::vector<int64_t> layout(count, 0);
  if (block <= 0) return layout;
  std::vector<std::vector<int>> users(count);
  for (int i = 0; i < count; ++i) {
    for (int in : layers[i].inputs) users[in].push_back(i);
  }
  std::vector<int> group(count);
  for (int i = 0; i < count; ++i) group[i] = i;
  auto find = [&](int i) {
    while (group[i] != i) i = group[i] = group[group[i]];
    return i;
  };
  for (int i = 1; i < count; ++i) {
    const LayerKind k = layers[i].kind;
    if (k != LayerKind::kBatchNorm && k != LayerKind::kRelu &&
        k != LayerKind::kAdd && k != LayerKind::kMaxPool) {
      continue;
    }
    for (int in : layers[i].inputs) group[find(in)] = find(i);
  }
  // Each group's block: the backend's, or the largest smaller one that
  // divides every member's channels (8 where 16 does not: 24 channels on
  // an AVX-512 CPU), or NCHW.
  std::vector<int64_t> group_block(count, block);
  for (int i = 0; i < count; ++i) {
    const Shape& s = layers[i].shape;  // one example's: (C, H, W) or (M)
    bool ok = i != 0 && s.size() == 3;
    for (int u : users[i]) ok = ok && layers[u].kind != LayerKind::kDense;
    int64_t& b = group_block[find(i)];
    b = ok ? LargestChannelBlock(s[0], b) : 0;
  }
  for (int i = 0; i < count; ++i) layout[i] = group_block[find(i)];
  return layout;
}

}  // namespace psgd
