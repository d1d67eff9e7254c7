// Softmax regression on CIFAR-10's 24x24 crops: one dense layer from the
// flattened image to the 10 logits, loss = mean softmax cross-entropy (no
// weight decay). Variables as Cifar10LinearVariables() (17,290 parameters).
//
//   x (N, 3, 24, 24) -> flatten (N, 1728) -> dense 1728 -> 10 -> logits
//
// Far cheaper than cifar10_tutorial: for cluster tests and soak runs that
// start many workers on a small machine, where what matters is the
// parameter servers' behaviour, not accuracy.
//
// Thread-safety: as Model (one thread at a time).
#ifndef PSGD_WORKER_MODELS_CIFAR10_LINEAR_H_
#define PSGD_WORKER_MODELS_CIFAR10_LINEAR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/models/model.h"

namespace psgd {

// `backend` is not owned and must outlive the model.
absl::StatusOr<std::unique_ptr<Model>> CreateCifar10Linear(Backend* backend);

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_CIFAR10_LINEAR_H_
