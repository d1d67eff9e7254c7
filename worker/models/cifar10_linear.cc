#include "worker/models/cifar10_linear.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "worker/models/device_variables.h"

namespace psgd {
namespace {

enum Var { kWeights, kBiases, kNumVars };
constexpr int64_t kChannels = 3, kSize = 24, kClasses = 10;
constexpr int64_t kInputs = kChannels * kSize * kSize;  // 1728

// The ops and activations for one batch size, made on first use.
struct Plan {
  int64_t batch = 0;
  std::unique_ptr<DenseOp> dense;
  std::unique_ptr<SoftmaxCrossEntropyOp> xent;
  DeviceTensor x, logits, d_logits;
};

absl::StatusOr<std::unique_ptr<Plan>> MakePlan(Backend* b, int64_t n) {
  auto p = std::make_unique<Plan>();
  p->batch = n;
  ASSIGN_OR_RETURN(p->dense, b->CreateDense({n, kInputs, kClasses}));
  ASSIGN_OR_RETURN(p->xent, b->CreateSoftmaxCrossEntropy({n, kClasses}));
  ASSIGN_OR_RETURN(p->x, b->Allocate({n, kInputs}));
  ASSIGN_OR_RETURN(p->logits, b->Allocate({n, kClasses}));
  ASSIGN_OR_RETURN(p->d_logits, b->Allocate({n, kClasses}));
  return p;
}

class Cifar10Linear : public Model {
 public:
  Cifar10Linear(Backend* backend, std::unique_ptr<DeviceVariables> vars)
      : backend_(backend), vars_(std::move(vars)) {}

  std::string name() const override { return "cifar10_linear"; }
  const std::vector<VariableSpec>& variables() const override {
    return vars_->specs();
  }
  Shape image_shape() const override { return {kChannels, kSize, kSize}; }
  int64_t num_classes() const override { return kClasses; }

  absl::StatusOr<StepResult> ComputeGradients(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels, NamedTensors* gradients) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, &labels));
    RETURN_IF_ERROR(Forward(p));
    ASSIGN_OR_RETURN(StepResult r, Loss(p, labels));
    RETURN_IF_ERROR(p->dense->BackwardWeights(p->x.view(), p->d_logits.view(),
                                              vars_->gradient(kWeights),
                                              vars_->gradient(kBiases)));
    RETURN_IF_ERROR(vars_->DownloadGradients(gradients));
    return r;
  }

  absl::StatusOr<StepResult> Evaluate(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, &labels));
    RETURN_IF_ERROR(Forward(p));
    return Loss(p, labels);
  }

  absl::Status Logits(const NamedConstViews& weights, ConstTensorView images,
                      TensorView logits) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, nullptr));
    RETURN_IF_ERROR(CheckShape("cifar10_linear", "logits", logits.shape(),
                               p->logits.shape()));
    RETURN_IF_ERROR(Forward(p));
    return backend_->CopyToHost(p->logits.view(), logits);
  }

 private:
  // Validates the inputs (labels may be null), uploads weights and the
  // flattened images and returns the plan for the batch size.
  absl::StatusOr<Plan*> Prepare(const NamedConstViews& weights,
                                ConstTensorView images,
                                const absl::Span<const int32_t>* labels) {
    const Shape& s = images.shape();
    if (s.size() != 4 || s[0] <= 0 || s[1] != kChannels || s[2] != kSize ||
        s[3] != kSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("cifar10_linear: images have shape ", ShapeToString(s),
                       ", expected [N, 3, 24, 24]"));
    }
    const int64_t n = s[0];
    if (labels != nullptr) {
      if (static_cast<int64_t>(labels->size()) != n) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cifar10_linear: ", labels->size(), " labels for ", n, " images"));
      }
      for (size_t i = 0; i < labels->size(); ++i) {
        if ((*labels)[i] < 0 || (*labels)[i] >= kClasses) {
          return absl::InvalidArgumentError(
              absl::StrCat("cifar10_linear: label ", (*labels)[i],
                           " of example ", i, " is outside [0, 10)"));
        }
      }
    }
    RETURN_IF_ERROR(vars_->Upload(weights));
    std::unique_ptr<Plan>& plan = plans_[n];
    if (plan == nullptr) {
      absl::StatusOr<std::unique_ptr<Plan>> made = MakePlan(backend_, n);
      if (!made.ok()) {
        plans_.erase(n);
        return made.status();
      }
      plan = std::move(made).value();
    }
    RETURN_IF_ERROR(backend_->CopyToDevice(images, plan->x.view()));
    return plan.get();
  }

  absl::Status Forward(Plan* p) {
    return p->dense->Forward(p->x.view(), vars_->weight(kWeights),
                             vars_->weight(kBiases), p->logits.view());
  }

  // Cross-entropy and accuracy; writes d_logits.
  absl::StatusOr<StepResult> Loss(Plan* p, absl::Span<const int32_t> labels) {
    ASSIGN_OR_RETURN(
        CrossEntropyResult ce,
        p->xent->Run(p->logits.view(), labels, p->d_logits.view()));
    StepResult r;
    r.cross_entropy = ce.loss;
    r.loss = ce.loss;
    r.correct = ce.correct;
    r.examples = p->batch;
    return r;
  }

  Backend* const backend_;  // Not owned.
  std::unique_ptr<DeviceVariables> vars_;
  std::map<int64_t, std::unique_ptr<Plan>> plans_;  // by batch size
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateCifar10Linear(Backend* backend) {
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceVariables> vars,
                   DeviceVariables::Create(Cifar10LinearVariables(), backend));
  return std::unique_ptr<Model>(
      std::make_unique<Cifar10Linear>(backend, std::move(vars)));
}

}  // namespace psgd
