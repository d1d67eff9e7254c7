// The engine that runs any NetworkSpec (network.h) as a Model on a Backend:
// one plan per batch size (the ops, every activation and gradient buffer,
// made once), a forward in layer order and a backward in reverse.
//
// Plan-time rewrites, so that the description stays plain:
//   - a ReLU whose input is a batch norm used by nothing else runs inside
//     that batch norm (BatchNormShape::relu) and shares its buffers;
//   - a layer whose only consumer is a residual add takes the add's
//     gradient buffer as its own (no copy);
//   - a layer read by several others sums their gradients (the first
//     writes, the others go through a scratch buffer and Backend::Add).
// Activations stay in the backends' plain NCHW layout between layers.
//
// Batch norm's running statistics are the model's state() (model.h): the
// training step updates them (PyTorch's momentum 0.1, unbiased variance),
// Evaluate and Logits normalise with them.
//
// Thread-safety: as Model (one thread at a time).
#ifndef PSGD_WORKER_MODELS_NETWORK_MODEL_H_
#define PSGD_WORKER_MODELS_NETWORK_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/models/model.h"
#include "worker/models/network.h"

namespace psgd {

// `backend` is not owned and must outlive the model. INVALID_ARGUMENT for
// a spec whose variables are invalid; the backend's errors (e.g.
// UNIMPLEMENTED where it lacks an op) come from the first call that plans
// a batch size.
absl::StatusOr<std::unique_ptr<Model>> CreateNetworkModel(NetworkSpec spec,
                                                          Backend* backend);

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_NETWORK_MODEL_H_
