// TensorFlow's cifar10 tutorial network on 24x24 crops (cifar10.py's
// inference()), written once against the Backend interface:
//
//   conv1 5x5x64 + bias + ReLU -> pool1 3x3/2 SAME -> norm1 (LRN)
//   conv2 5x5x64 + bias + ReLU -> norm2 (LRN) -> pool2 3x3/2 SAME
//   local3 2304 -> 384 + ReLU -> local4 384 -> 192 + ReLU
//   softmax_linear 192 -> 10
//   loss = mean softmax cross-entropy + 0.004 * (l2_loss(local3/weights) +
//          l2_loss(local4/weights))
//
// Variables as Cifar10TutorialVariables() (1,068,298 parameters). local3's
// 2304 inputs are pool2's (64, 6, 6) output flattened in (C, H, W) order
// (TensorFlow's NHWC tutorial flattens (H, W, C); a checkpoint from it would
// need its rows permuted).
//
// Thread-safety: as Model (one thread at a time).
#ifndef PSGD_WORKER_MODELS_CIFAR10_TUTORIAL_H_
#define PSGD_WORKER_MODELS_CIFAR10_TUTORIAL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/models/model.h"

namespace psgd {

// `backend` is not owned and must outlive the model.
absl::StatusOr<std::unique_ptr<Model>> CreateCifar10Tutorial(Backend* backend);

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_CIFAR10_TUTORIAL_H_
