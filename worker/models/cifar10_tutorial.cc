#include "worker/models/cifar10_tutorial.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "worker/models/cifar10_tutorial_net.h"
#include "worker/models/device_variables.h"

namespace psgd {
namespace {

using Net = Cifar10TutorialNet;

class Cifar10Tutorial : public Model {
 public:
  Cifar10Tutorial(Backend* backend, std::unique_ptr<DeviceVariables> vars)
      : backend_(backend), vars_(std::move(vars)) {}

  std::string name() const override { return "cifar10_tutorial"; }
  const std::vector<VariableSpec>& variables() const override {
    return vars_->specs();
  }
  Shape image_shape() const override {
    return {Net::kChannels, Net::kSize, Net::kSize};
  }
  int64_t num_classes() const override { return Net::kClasses; }

  absl::StatusOr<StepResult> ComputeGradients(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels, NamedTensors* gradients) override {
    ASSIGN_OR_RETURN(Net * net, Prepare(weights, images, &labels));
    const Net::Weights w = Weights();
    const Net::Gradients g = Gradients();
    RETURN_IF_ERROR(net->Forward(net->images(), w));
    ASSIGN_OR_RETURN(StepResult r, net->Loss(labels));
    RETURN_IF_ERROR(net->Backward(net->images(), w, g));
    ASSIGN_OR_RETURN(r.weight_decay, net->WeightDecay(w, g));
    r.loss = r.cross_entropy + r.weight_decay;
    RETURN_IF_ERROR(vars_->DownloadGradients(gradients));
    return r;
  }

  absl::StatusOr<StepResult> ComputeGradientsWithHooks(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels, NamedTensors* gradients,
      const StepHooks& hooks) override {
    ASSIGN_OR_RETURN(Net * net,
                     Prepare(weights, images, &labels, /*upload=*/false));
    vars_->ShapeGradients(gradients);
    const Net::Weights w = Weights();
    const Net::Gradients g = Gradients();
    // Each layer's weights as the forward reaches it.
    auto before = [&](Net::Var layer) -> absl::Status {
      for (int v : {static_cast<int>(layer), layer + 1}) {
        if (hooks.await_weights) RETURN_IF_ERROR(hooks.await_weights(v));
        RETURN_IF_ERROR(vars_->UploadWeight(v, weights));
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(net->Forward(net->images(), w, before));
    ASSIGN_OR_RETURN(StepResult r, net->Loss(labels));
    // Each layer's gradients, decay included, as the backward leaves them.
    // The decays are summed in another order than WeightDecay's, but there
    // are two: a + b == b + a.
    double decay = 0.0;
    auto after = [&](Net::Var layer) -> absl::Status {
      ASSIGN_OR_RETURN(const double d, net->WeightDecayOf(layer, w, g));
      decay += d;
      for (int v : {static_cast<int>(layer), layer + 1}) {
        RETURN_IF_ERROR(vars_->DownloadGradient(v, gradients));
        if (hooks.gradient_ready) hooks.gradient_ready(v);
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(net->Backward(net->images(), w, g, after));
    r.weight_decay = decay;
    r.loss = r.cross_entropy + r.weight_decay;
    return r;
  }

  absl::StatusOr<StepResult> Evaluate(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels) override {
    ASSIGN_OR_RETURN(Net * net, Prepare(weights, images, &labels));
    RETURN_IF_ERROR(net->Forward(net->images(), Weights()));
    ASSIGN_OR_RETURN(StepResult r, net->Loss(labels));
    r.loss = r.cross_entropy;
    return r;
  }

  absl::Status Logits(const NamedConstViews& weights, ConstTensorView images,
                      TensorView logits) override {
    ASSIGN_OR_RETURN(Net * net, Prepare(weights, images, nullptr));
    RETURN_IF_ERROR(CheckShape("cifar10_tutorial", "logits", logits.shape(),
                               net->logits().shape()));
    RETURN_IF_ERROR(net->Forward(net->images(), Weights()));
    return backend_->CopyToHost(net->logits(), logits);
  }

 private:
  // Validates the inputs (labels may be null), uploads the weights (unless
  // not `upload`: the caller does, layer by layer) and the images and
  // returns the plan for the batch size.
  absl::StatusOr<Net*> Prepare(const NamedConstViews& weights,
                               ConstTensorView images,
                               const absl::Span<const int32_t>* labels,
                               bool upload = true) {
    const Shape& s = images.shape();
    if (s.size() != 4 || s[0] <= 0 || s[1] != Net::kChannels ||
        s[2] != Net::kSize || s[3] != Net::kSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("cifar10_tutorial: images have shape ", ShapeToString(s),
                       ", expected [N, 3, 24, 24]"));
    }
    const int64_t n = s[0];
    if (labels != nullptr) {
      if (static_cast<int64_t>(labels->size()) != n) {
        return absl::InvalidArgumentError(
            absl::StrCat("cifar10_tutorial: ", labels->size(), " labels for ",
                         n, " images"));
      }
      for (size_t i = 0; i < labels->size(); ++i) {
        if ((*labels)[i] < 0 || (*labels)[i] >= Net::kClasses) {
          return absl::InvalidArgumentError(
              absl::StrCat("cifar10_tutorial: label ", (*labels)[i],
                           " of example ", i, " is outside [0, 10)"));
        }
      }
    }
    RETURN_IF_ERROR(upload ? vars_->Upload(weights) : vars_->Validate(weights));
    std::unique_ptr<Net>& net = nets_[n];
    if (net == nullptr) {
      absl::StatusOr<std::unique_ptr<Net>> made = Net::Create(backend_, n);
      if (!made.ok()) {
        nets_.erase(n);
        return made.status();
      }
      net = std::move(made).value();
    }
    RETURN_IF_ERROR(backend_->CopyToDevice(images, net->images()));
    return net.get();
  }

  Net::Weights Weights() const {
    Net::Weights w;
    for (int i = 0; i < Net::kNumVars; ++i) w[i] = vars_->weight(i);
    return w;
  }
  Net::Gradients Gradients() {
    Net::Gradients g;
    for (int i = 0; i < Net::kNumVars; ++i) g[i] = vars_->gradient(i);
    return g;
  }

  Backend* const backend_;  // Not owned.
  std::unique_ptr<DeviceVariables> vars_;
  std::map<int64_t, std::unique_ptr<Net>> nets_;  // by batch size
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateCifar10Tutorial(Backend* backend) {
  std::vector<VariableSpec> specs = Cifar10TutorialVariables();
  RETURN_IF_ERROR(Net::CheckVariables(specs, "cifar10_tutorial"));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceVariables> vars,
                   DeviceVariables::Create(std::move(specs), backend));
  return std::unique_ptr<Model>(
      std::make_unique<Cifar10Tutorial>(backend, std::move(vars)));
}

}  // namespace psgd
