#include "worker/bench/model_steps.h"

#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/state/options.h"
#include "worker/models/initialize.h"
#include "worker/models/network_model.h"
#include "worker/models/registry.h"
#include "worker/random.h"
#include "worker/train/local_optimizer.h"

namespace psgd {

namespace {

using Clock = std::chrono::steady_clock;

// `batch` images of standard normal pixels and uniform labels for `model`.
void RandomBatch(const Model& model, int64_t batch, uint64_t seed,
                 Tensor* images, std::vector<int32_t>* labels) {
  Shape shape = model.image_shape();
  shape.insert(shape.begin(), batch);
  *images = Tensor(shape);
  labels->assign(batch, 0);
  Rng rng(seed);
  for (float& v : images->span()) v = static_cast<float>(rng.Normal());
  for (int32_t& l : *labels) {
    l = static_cast<int32_t>(rng.UniformInt(model.num_classes()));
  }
}

}  // namespace

absl::StatusOr<ModelStepsResult> TimeModelSteps(Backend* backend,
                                                const std::string& model_name,
                                                int64_t batch, int warmup,
                                                int steps, uint64_t seed,
                                                LayerProfile* profile) {
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return 1e3 * std::chrono::duration<double>(b - a).count();
  };
  if (batch < 1 || warmup < 0 || steps < 1) {
    return absl::InvalidArgumentError(
        "TimeModelSteps: batch and steps must be >= 1, warmup >= 0");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   CreateModel(model_name, backend));
  Tensor images;
  std::vector<int32_t> labels;
  RandomBatch(*model, batch, seed, &images, &labels);
  NamedTensors weights = InitialValues(model->variables(), seed), grads;
  // Adam with TensorFlow's defaults, as the servers apply it.
  ASSIGN_OR_RETURN(
      std::unique_ptr<LocalOptimizer> adam,
      LocalOptimizer::Create(ps::OptimizerOptions(), model->variables()));
  ModelStepsResult r;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      r.compute_ms = r.adam_ms = 0.0;
      if (profile != nullptr && !model->ProfileLayers(profile)) {
        return absl::InvalidArgumentError(
            absl::StrCat("model ", model_name, " has no layers to time"));
      }
    }
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(StepResult step,
                     model->ComputeGradients(ViewsOf(weights), images.view(),
                                             labels, &grads));
    const Clock::time_point t1 = Clock::now();
    RETURN_IF_ERROR(adam->Apply(grads, &weights));
    r.compute_ms += ms(t0, t1);
    r.adam_ms += ms(t1, Clock::now());
    if (s == 0) r.first_loss = step.loss;
    r.last_loss = step.loss;
  }
  r.compute_ms /= steps;
  r.adam_ms /= steps;
  r.images_per_s = batch * 1e3 / (r.compute_ms + r.adam_ms);
  return r;
}

absl::StatusOr<double> TimeEvaluation(Backend* backend,
                                      const std::string& model_name,
                                      int64_t batch, int warmup, int steps,
                                      uint64_t seed, bool fold_batch_norm) {
  if (batch < 1 || warmup < 0 || steps < 1) {
    return absl::InvalidArgumentError(
        "TimeEvaluation: batch and steps must be >= 1, warmup >= 0");
  }
  absl::StatusOr<NetworkSpec> spec = ModelNetworkSpec(model_name);
  if (absl::IsNotFound(spec.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", model_name, " is not a layer graph: no inference to time"));
  }
  if (!spec.ok()) return spec.status();
  NetworkOptions options;
  options.fold_batch_norm = fold_batch_norm;
  ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      CreateNetworkModel(std::move(spec).value(), backend, options));
  Tensor images;
  std::vector<int32_t> labels;
  RandomBatch(*model, batch, seed, &images, &labels);
  const NamedTensors weights = InitialValues(model->variables(), seed);
  Clock::time_point start;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) start = Clock::now();
    RETURN_IF_ERROR(
        model->Evaluate(ViewsOf(weights), images.view(), labels).status());
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  return batch * steps / seconds;
}

}  // namespace psgd
