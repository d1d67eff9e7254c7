// Timed training steps of a model from the registry, as a worker runs them:
// Model::ComputeGradients on a fixed random batch (standard normal pixels,
// uniform labels), then Adam with TensorFlow's defaults applied on the host
// by the servers' optimizer (worker/train/local_optimizer.h). The CPU
// benchmark (compute_bench) and the GPU one (gpu_bench --model) both time
// it.
//
// Thread-safety: uses the backend from the calling thread.
#ifndef PSGD_WORKER_BENCH_MODEL_STEPS_H_
#define PSGD_WORKER_BENCH_MODEL_STEPS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/models/model.h"

namespace psgd {

struct ModelStepsResult {
  double images_per_s = 0.0;  // batch over the mean step (compute + Adam)
  double compute_ms = 0.0;    // mean ComputeGradients of the timed steps
  double adam_ms = 0.0;       // mean Adam
  double first_loss = 0.0;    // of the first step (warm-up included)
  double last_loss = 0.0;
};

// `warmup` untimed steps, then `steps` timed ones (>= 1), of model
// `model_name` on `backend`; weights and batch drawn from `seed`.
// INVALID_ARGUMENT for an unknown model; the model's and backend's errors.
// `profile`: when set, the timed steps' layers are timed into it too
// (Model::ProfileLayers; each layer then synchronises the backend, so the
// steps' own times are not the figures to quote).
absl::StatusOr<ModelStepsResult> TimeModelSteps(
    Backend* backend, const std::string& model_name, int64_t batch, int warmup,
    int steps, uint64_t seed, LayerProfile* profile = nullptr);

// Timed inference of a layer-graph network (resnet20, ...): `warmup`
// untimed, then `steps` timed Model::Evaluate calls on a fixed random batch
// with batch norm's running statistics, with the inference fold of
// convolution + batch norm (+ ReLU) or without it
// (NetworkOptions::fold_batch_norm). Returns images per second.
// INVALID_ARGUMENT for an unknown model or one written by hand.
absl::StatusOr<double> TimeEvaluation(Backend* backend,
                                      const std::string& model_name,
                                      int64_t batch, int warmup, int steps,
                                      uint64_t seed, bool fold_batch_norm);

}  // namespace psgd

#endif  // PSGD_WORKER_BENCH_MODEL_STEPS_H_
