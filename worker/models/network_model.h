// The engine that runs any NetworkSpec (network.h) as a Model on a Backend:
// one plan per batch size (the ops, every activation and gradient buffer,
// made once), a forward in layer order and a backward in reverse.
//
// Plan-time rewrites, so that the description stays plain (each a pass of
// network_plan.h, which also places every buffer in one arena):
//   - a ReLU whose input is a batch norm used by nothing else runs inside
//     that batch norm (BatchNormShape::relu) and shares its buffers;
//   - a ReLU whose input is a residual add used by nothing else runs inside
//     that add (Backend::AddRelu) and shares its output;
//   - a layer whose only consumer is a residual add takes the add's
//     gradient buffer as its own (no copy);
//   - a layer read by several others sums their gradients (the first
//     writes, the others go through a scratch buffer and Backend::Add);
//   - in inference (Evaluate, Logits), a convolution followed at once by a
//     batch norm that reads only it runs with the batch norm folded into
//     its weights and bias (w * gamma / sqrt(var + eps), (b - mean) *
//     gamma / sqrt(var + eps) + beta, from the running statistics, at each
//     call) and with the batch norm's fused ReLU as its own
//     (Conv2dShape::relu), writing the batch norm's output: one pass
//     instead of two (NetworkOptions::fold_batch_norm).
// Activations stay in the layout ChooseLayouts (network.h) picks for the
// backend's channel block between layers.
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

struct NetworkOptions {
  // The inference fold of convolution + batch norm (+ ReLU) above; off:
  // inference runs the layers one by one, as training does (for tests and
  // compute_bench --eval's comparison).
  bool fold_batch_norm = true;
};

// `backend` is not owned and must outlive the model. INVALID_ARGUMENT for
// a spec whose variables are invalid; the backend's errors (e.g.
// UNIMPLEMENTED where it lacks an op) come from the first call that plans
// a batch size.
absl::StatusOr<std::unique_ptr<Model>> CreateNetworkModel(
    NetworkSpec spec, Backend* backend, NetworkOptions options = {});

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_NETWORK_MODEL_H_
