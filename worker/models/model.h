// A model, as the worker's training loops see it: a list of named variables
// (the same names and shapes the parameter servers hold) and one call that
// turns weights and a batch into the loss, the accuracy and the gradients.
// The arithmetic runs on a Backend; weights, images and gradients are host
// tensors, so that the caller (train_local, the cluster worker) never sees
// backend memory.
//
//   ASSIGN_OR_RETURN(auto backend, CreateBackend("cpu", {}));
//   ASSIGN_OR_RETURN(auto model, CreateModel("cifar10_tutorial",
//   backend.get())); NamedTensors grads; ASSIGN_OR_RETURN(StepResult r,
//   model->ComputeGradients(weights, images,
//                                                          labels, &grads));
//
// Thread-safety: a Model is used by one thread at a time (it owns per-batch
// plans and backend buffers). It must not outlive its backend.
#ifndef PSGD_WORKER_MODELS_MODEL_H_
#define PSGD_WORKER_MODELS_MODEL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_variables.h"
#include "common/tensor.h"

namespace psgd {

// Host tensors by variable name.
using NamedTensors = absl::flat_hash_map<std::string, Tensor>;
// Borrowed host views by variable name (e.g. of NamedTensors, or of a
// buffer pulled from the parameter servers).
using NamedConstViews = absl::flat_hash_map<std::string, ConstTensorView>;

// Views of every tensor in `tensors`.
NamedConstViews ViewsOf(const NamedTensors& tensors);

struct StepResult {
  double loss = 0.0;           // cross_entropy + weight_decay
  double cross_entropy = 0.0;  // mean over the batch
  double weight_decay = 0.0;   // sum of decay * l2_loss(w)
  int64_t correct = 0;         // examples predicted right
  int64_t examples = 0;        // the batch size
  double accuracy() const {
    return examples == 0 ? 0.0 : static_cast<double>(correct) / examples;
  }
};

// Overlap (docs/CLUSTER.md, "Overlap"): what a training loop is told in
// the middle of Model::ComputeGradientsWithHooks, on the calling thread.
// Variables are indices into Model::variables().
// Per-layer wall time of a layer-graph network's training steps
// (compute_bench --breakdown): each layer's forward and backward, summed
// over the steps profiled, the backend synchronised around each so that a
// layer's time is its own.
struct LayerTiming {
  std::string name;  // the layer's name ("layer1.0.conv1"), or its kind
  std::string kind;  // "conv", "batch_norm", "relu", ...
  double forward_s = 0.0;
  double backward_s = 0.0;
};
struct LayerProfile {
  std::vector<LayerTiming> layers;  // by layer index; [0] is the input
  int64_t steps = 0;                // training steps profiled
};

struct StepHooks {
  // Right before the forward first reads variable v, in forward order; when
  // it returns OK, v's view in `weights` must hold the step's values. An
  // error ends the call with it.
  std::function<absl::Status(int v)> await_weights;
  // As soon as v's gradient in `gradients` is final (weight decay
  // included), last layer first. The tensor stays as it is until the next
  // call of ComputeGradients(WithHooks).
  std::function<void(int v)> gradient_ready;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual std::string name() const = 0;
  // The variables, in a fixed order; their names key weights and gradients.
  virtual const std::vector<VariableSpec>& variables() const = 0;
  // One image: (channels, height, width).
  virtual Shape image_shape() const = 0;
  virtual int64_t num_classes() const = 0;

  // weights: one host view per variable (exactly the variables' names and
  // shapes); images: (N, C, H, W) as image_shape(); labels: N values in
  // [0, num_classes()). Fills `gradients` with one tensor per variable, the
  // gradient of loss = mean cross-entropy + weight decay (reusing tensors
  // already there with the right shape). INVALID_ARGUMENT naming the
  // variable, shape or label that is wrong; nothing is written then.
  virtual absl::StatusOr<StepResult> ComputeGradients(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels, NamedTensors* gradients) = 0;

  // ComputeGradients with `hooks` (either may be empty): same results, bit
  // for bit. `gradients` gets every variable's tensor before the first
  // gradient_ready, so that none moves afterwards. This default awaits every
  // variable first and reports every gradient at the end; a model overrides
  // it to call them layer by layer.
  virtual absl::StatusOr<StepResult> ComputeGradientsWithHooks(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels, NamedTensors* gradients,
      const StepHooks& hooks) {
    const int n = static_cast<int>(variables().size());
    for (int v = 0; hooks.await_weights && v < n; ++v) {
      if (absl::Status s = hooks.await_weights(v); !s.ok()) return s;
    }
    absl::StatusOr<StepResult> r =
        ComputeGradients(weights, images, labels, gradients);
    for (int v = n - 1; r.ok() && hooks.gradient_ready && v >= 0; --v) {
      hooks.gradient_ready(v);
    }
    return r;
  }

  // --- Non-trainable state -----------------------------------------------
  // Named tensors that belong to the model but are not variables: batch
  // norm's running statistics ("bn1.running_mean", "bn1.running_var"). A
  // training step (ComputeGradients*) updates them; Evaluate and Logits
  // read them. Names never collide with variables(). Empty (the default)
  // for models without; a later issue sends them to the parameter servers
  // with the push, hence names and shapes.
  virtual const std::vector<VariableSpec>& state() const {
    static const std::vector<VariableSpec>* const kNone =
        new std::vector<VariableSpec>();
    return *kNone;
  }
  // Copies every state tensor into `out` (one per state() spec, reusing
  // tensors of the right shape).
  virtual absl::Status GetState(NamedTensors* out) { return absl::OkStatus(); }
  // Replaces the state: `state` has exactly one view per state() spec, of
  // its shape; INVALID_ARGUMENT naming the first missing, unknown or
  // misshapen one (nothing is changed then).
  virtual absl::Status SetState(const NamedConstViews& state) {
    if (state.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(name() + " has no state, but '" +
                                      state.begin()->first + "' came");
  }

  // The batch statistics of the last training step (ComputeGradients*),
  // one tensor per state() spec, under its name (reusing tensors of the
  // right shape): for a running mean the batch's mean, for a running
  // variance the batch's unbiased variance (divided by M - 1, M = N * H *
  // W): what the step folded into the state, and what a push carries to
  // servers that keep the statistics (docs/CLUSTER.md, "Batch norm").
  // FAILED_PRECONDITION before the first training step of a model with
  // state; OK with nothing written for a model without.
  virtual absl::Status GetBatchStatistics(NamedTensors* out) {
    return absl::OkStatus();
  }

  // Forward only: cross-entropy and accuracy of a batch (e.g. of the test
  // set); weight_decay is 0 and loss equals cross_entropy.
  // Times each layer of the training steps that follow into `profile`
  // (null: stops); false for a model without layers to time (the
  // hand-written ones), which then times nothing.
  virtual bool ProfileLayers(LayerProfile* profile) { return false; }

  // The memory a training step of `batch` images holds beyond the
  // variables, known before it runs (the step's plan is made, not run):
  // the activations the backward reads, the gradient buffers, the sums and
  // the backend's workspace. UNIMPLEMENTED for a model that plans nothing
  // ahead (the hand-written ones).
  virtual absl::StatusOr<int64_t> StepBytes(int64_t batch) {
    return absl::UnimplementedError(name() + " plans no step memory");
  }

  virtual absl::StatusOr<StepResult> Evaluate(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels) = 0;

  // Forward only: logits (N, num_classes()) of a batch.
  virtual absl::Status Logits(const NamedConstViews& weights,
                              ConstTensorView images, TensorView logits) = 0;
};

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_MODEL_H_
