#include "worker/models/cifar_networks.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace {

constexpr int64_t kClasses = 10;
const Shape kImage = {3, 32, 32};

// conv -> batch norm: the pair every block is made of.
int ConvBn(NetworkBuilder& b, int x, const std::string& conv,
           const std::string& bn, int64_t out, int64_t kernel, int64_t stride) {
  return b.BatchNorm(b.Conv(x, conv, out, kernel, stride, kernel / 2), bn);
}

// x itself, or a 1x1 conv + BN to `out` channels at `stride` where the
// shape changes (He et al.'s projection shortcut).
int Shortcut(NetworkBuilder& b, int x, const std::string& p, int64_t out,
             int64_t stride) {
  if (stride == 1 && b.shape(x)[0] == out) return x;
  return ConvBn(b, x, p + "shortcut.0", p + "shortcut.1", out, 1, stride);
}

// He et al.'s basic block: relu(bn2(conv2(relu(bn1(conv1(x))))) + sc(x)),
// sc a 1x1 conv + BN where the shape changes.
int BasicBlock(NetworkBuilder& b, int x, const std::string& p, int64_t out,
               int64_t stride) {
  int y = b.Relu(ConvBn(b, x, p + "conv1", p + "bn1", out, 3, stride));
  y = ConvBn(b, y, p + "conv2", p + "bn2", out, 3, 1);
  return b.Relu(b.Add(y, Shortcut(b, x, p, out, stride)));
}

// torchvision's bottleneck (stride on the 3x3): 1x1 width, 3x3 width, 1x1
// 4 width.
int Bottleneck(NetworkBuilder& b, int x, const std::string& p, int64_t width,
               int64_t stride) {
  const int64_t out = 4 * width;
  int y = b.Relu(ConvBn(b, x, p + "conv1", p + "bn1", width, 1, 1));
  y = b.Relu(ConvBn(b, y, p + "conv2", p + "bn2", width, 3, stride));
  y = ConvBn(b, y, p + "conv3", p + "bn3", out, 1, 1);
  return b.Relu(b.Add(y, Shortcut(b, x, p, out, stride)));
}

// Zagoruyko & Komodakis's pre-activation block: o = relu(bn1(x));
// conv2(relu(bn2(conv1(o)))) + (x, or a 1x1 conv of o where the shape
// changes).
int WideBlock(NetworkBuilder& b, int x, const std::string& p, int64_t out,
              int64_t stride) {
  const int o = b.Relu(b.BatchNorm(x, p + "bn1"));
  int shortcut = x;
  if (stride != 1 || b.shape(x)[0] != out) {
    shortcut = b.Conv(o, p + "shortcut", out, 1, stride, 0);
  }
  int y = b.Conv(o, p + "conv1", out, 3, stride, 1);
  y = b.Relu(b.BatchNorm(y, p + "bn2"));
  y = b.Conv(y, p + "conv2", out, 3, 1, 1);
  return b.Add(y, shortcut);
}

using Block = int (*)(NetworkBuilder&, int, const std::string&, int64_t,
                      int64_t);

struct Stage {
  int64_t channels;  // the block's `out` / `width` argument
  int blocks;
};

// Stages named layer1, layer2, ...; the first block of every stage but the
// first has stride 2.
int Stages(NetworkBuilder& b, int x, Block block,
           const std::vector<Stage>& stages) {
  for (size_t s = 0; s < stages.size(); ++s) {
    for (int i = 0; i < stages[s].blocks; ++i) {
      x = block(b, x, absl::StrCat("layer", s + 1, ".", i, "."),
                stages[s].channels, i == 0 && s > 0 ? 2 : 1);
    }
  }
  return x;
}

absl::Status BadDepth(const char* what, int depth, const char* rule) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " depth ", depth, " is not ", rule));
}

}  // namespace

absl::StatusOr<NetworkSpec> CifarResNet(int depth) {
  if (depth < 8 || (depth - 2) % 6 != 0) {
    return BadDepth("resnet", depth, "6 n + 2");
  }
  const int n = (depth - 2) / 6;
  NetworkBuilder b(absl::StrCat("resnet", depth), kImage, kClasses,
                   kCifarWeightDecay);
  int x = b.Relu(ConvBn(b, b.input(), "conv1", "bn1", 16, 3, 1));
  x = Stages(b, x, &BasicBlock, {{16, n}, {32, n}, {64, n}});
  b.Dense(b.GlobalAvgPool(x), "fc", kClasses);
  return std::move(b).Build();
}

absl::StatusOr<NetworkSpec> WideResNet(int depth, int k) {
  if (depth < 10 || (depth - 4) % 6 != 0 || k < 1) {
    return BadDepth("wide resnet", depth, "6 n + 4 (or k < 1)");
  }
  const int n = (depth - 4) / 6;
  NetworkBuilder b(absl::StrCat("wrn_", depth, "_", k), kImage, kClasses,
                   kCifarWeightDecay);
  int x = b.Conv(b.input(), "conv1", 16, 3, 1, 1);
  x = Stages(b, x, &WideBlock, {{16 * k, n}, {32 * k, n}, {64 * k, n}});
  x = b.Relu(b.BatchNorm(x, "bn"));
  b.Dense(b.GlobalAvgPool(x), "fc", kClasses);
  return std::move(b).Build();
}

absl::StatusOr<NetworkSpec> Cnn10() {
  NetworkBuilder b("cnn10", kImage, kClasses, kCifarWeightDecay);
  // PyTorch's nn.Sequential numbering: conv i, bn i + 1, relu i + 2; a max
  // pool takes one index.
  constexpr int kPool = 0;
  int x = b.input();
  int index = 0;
  for (int c : {64, 64, 64, kPool, 128, 128, 128, kPool, 256, 256, 256}) {
    if (c == kPool) {
      x = b.MaxPool(x, 2, 2);
      index += 1;
      continue;
    }
    x = b.Relu(ConvBn(b, x, absl::StrCat("features.", index),
                      absl::StrCat("features.", index + 1), c, 3, 1));
    index += 3;
  }
  b.Dense(b.GlobalAvgPool(x), "fc", kClasses);
  return std::move(b).Build();
}

absl::StatusOr<NetworkSpec> ResNet50Cifar() {
  NetworkBuilder b("resnet50_cifar", kImage, kClasses, kCifarWeightDecay);
  int x = b.Relu(ConvBn(b, b.input(), "conv1", "bn1", 64, 3, 1));
  x = Stages(b, x, &Bottleneck, {{64, 3}, {128, 4}, {256, 6}, {512, 3}});
  b.Dense(b.GlobalAvgPool(x), "fc", kClasses);
  return std::move(b).Build();
}

}  // namespace psgd
