// The layer-graph networks for 32x32 CIFAR images, as torchvision's
// resnet.py writes them: a block type and a list of stages, not one function
// per network. Variable names are those of the PyTorch definitions in
// worker/models/torch_check/torch_networks.py, and the parameter counts are
// theirs (trainable parameters; running statistics are state):
//
//   resnet20 / resnet56  He et al. 2016, CIFAR form: 3x3 convs with 16, 32,
//                        64 channels, 3 stages of n = 3 / 9 basic blocks,
//                        shortcuts a 1x1 conv + BN where the shape changes
//                        (272,474 / 855,770)
//   wrn_16_4 / wrn_28_10 Zagoruyko & Komodakis, pre-activation blocks, 1x1
//                        conv shortcuts (from the activated input) where the
//                        shape changes (2,748,890 / 36,479,194)
//   cnn10                nine 3x3 conv + BN + ReLU (64 x3, max pool, 128 x3,
//                        max pool, 256 x3), global average pool, dense 10
//                        (1,923,914)
//   resnet50_cifar       bottleneck ResNet-50 (torchvision's, stride on the
//                        3x3), 3x3 stride-1 stem, no max pool (23,520,842)
//
// Convolutions have no bias (batch norm follows each); the dense layer has
// one. Weight decay 5e-4 on conv and dense weights.
//
// Thread-safety: pure functions.
#ifndef PSGD_WORKER_MODELS_CIFAR_NETWORKS_H_
#define PSGD_WORKER_MODELS_CIFAR_NETWORKS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/models/network.h"

namespace psgd {

constexpr float kCifarWeightDecay = 5e-4f;

// depth = 6 n + 2: 20, 56, ...
absl::StatusOr<NetworkSpec> CifarResNet(int depth);
// depth = 6 n + 4: 16, 28, ...; width factor k.
absl::StatusOr<NetworkSpec> WideResNet(int depth, int k);
absl::StatusOr<NetworkSpec> Cnn10();
absl::StatusOr<NetworkSpec> ResNet50Cifar();

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_CIFAR_NETWORKS_H_
