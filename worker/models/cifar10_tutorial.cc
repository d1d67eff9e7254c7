#include "worker/models/cifar10_tutorial.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "worker/models/device_variables.h"

namespace psgd {
namespace {

// Positions in Cifar10TutorialVariables(); checked at creation.
enum Var {
  kConv1W,
  kConv1B,
  kConv2W,
  kConv2B,
  kLocal3W,
  kLocal3B,
  kLocal4W,
  kLocal4B,
  kSoftmaxW,
  kSoftmaxB,
  kNumVars
};
constexpr const char* kVarNames[kNumVars] = {
    "conv1/weights",        "conv1/biases",   "conv2/weights",
    "conv2/biases",         "local3/weights", "local3/biases",
    "local4/weights",       "local4/biases",  "softmax_linear/weights",
    "softmax_linear/biases"};

constexpr int64_t kChannels = 3, kSize = 24, kFilters = 64, kKernel = 5;
constexpr int64_t kPooled1 = 12, kPooled2 = 6;
constexpr int64_t kLocal3 = 384, kLocal4 = 192, kClasses = 10;
constexpr int64_t kFlat = kFilters * kPooled2 * kPooled2;  // 2304
constexpr float kWeightDecay = 0.004f;

// The ops and activations for one batch size, made on first use.
struct Plan {
  int64_t batch = 0;
  std::unique_ptr<Conv2dOp> conv1, conv2;
  std::unique_ptr<MaxPoolOp> pool1, pool2;
  std::unique_ptr<LrnOp> norm1, norm2;
  std::unique_ptr<DenseOp> local3, local4, softmax;
  std::unique_ptr<SoftmaxCrossEntropyOp> xent;
  // Forward activations (after the in-place ReLUs where there is one).
  DeviceTensor x, a1, p1, n1, a2, n2, p2, h3, h4, logits;
  // Gradients of the activations.
  DeviceTensor d_logits, d_h4, d_h3, d_p2, d_n2, d_a2, d_n1, d_p1, d_a1;
};

absl::StatusOr<std::unique_ptr<Plan>> MakePlan(Backend* b, int64_t n) {
  auto p = std::make_unique<Plan>();
  p->batch = n;
  const LrnParams lrn;  // the tutorial's constants are the defaults
  ASSIGN_OR_RETURN(p->conv1, b->CreateConv2d({n, kChannels, kSize, kSize,
                                              kFilters, kKernel, kKernel}));
  ASSIGN_OR_RETURN(p->pool1,
                   b->CreateMaxPool({n, kFilters, kSize, kSize, 3, 2}));
  ASSIGN_OR_RETURN(p->norm1,
                   b->CreateLrn({n, kFilters, kPooled1, kPooled1, lrn}));
  ASSIGN_OR_RETURN(p->conv2, b->CreateConv2d({n, kFilters, kPooled1, kPooled1,
                                              kFilters, kKernel, kKernel}));
  ASSIGN_OR_RETURN(p->norm2,
                   b->CreateLrn({n, kFilters, kPooled1, kPooled1, lrn}));
  ASSIGN_OR_RETURN(p->pool2,
                   b->CreateMaxPool({n, kFilters, kPooled1, kPooled1, 3, 2}));
  ASSIGN_OR_RETURN(p->local3, b->CreateDense({n, kFlat, kLocal3}));
  ASSIGN_OR_RETURN(p->local4, b->CreateDense({n, kLocal3, kLocal4}));
  ASSIGN_OR_RETURN(p->softmax, b->CreateDense({n, kLocal4, kClasses}));
  ASSIGN_OR_RETURN(p->xent, b->CreateSoftmaxCrossEntropy({n, kClasses}));

  const Shape image = {n, kChannels, kSize, kSize};
  const Shape big = {n, kFilters, kSize, kSize};
  const Shape mid = {n, kFilters, kPooled1, kPooled1};
  const Shape small = {n, kFilters, kPooled2, kPooled2};
  const std::pair<DeviceTensor*, Shape> buffers[] = {
      {&p->x, image},
      {&p->a1, big},
      {&p->p1, mid},
      {&p->n1, mid},
      {&p->a2, mid},
      {&p->n2, mid},
      {&p->p2, small},
      {&p->h3, {n, kLocal3}},
      {&p->h4, {n, kLocal4}},
      {&p->logits, {n, kClasses}},
      {&p->d_logits, {n, kClasses}},
      {&p->d_h4, {n, kLocal4}},
      {&p->d_h3, {n, kLocal3}},
      {&p->d_p2, small},
      {&p->d_n2, mid},
      {&p->d_a2, mid},
      {&p->d_n1, mid},
      {&p->d_p1, mid},
      {&p->d_a1, big},
  };
  for (const auto& [tensor, shape] : buffers) {
    ASSIGN_OR_RETURN(*tensor, b->Allocate(shape));
  }
  return p;
}

class Cifar10Tutorial : public Model {
 public:
  Cifar10Tutorial(Backend* backend, std::unique_ptr<DeviceVariables> vars)
      : backend_(backend), vars_(std::move(vars)) {}

  std::string name() const override { return "cifar10_tutorial"; }
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
    RETURN_IF_ERROR(Backward(p));
    for (Var v : {kLocal3W, kLocal4W}) {
      ASSIGN_OR_RETURN(double decay,
                       backend_->L2WeightDecay(vars_->weight(v), kWeightDecay,
                                               vars_->gradient(v)));
      r.weight_decay += decay;
    }
    r.loss = r.cross_entropy + r.weight_decay;
    RETURN_IF_ERROR(vars_->DownloadGradients(gradients));
    return r;
  }

  absl::StatusOr<StepResult> Evaluate(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, &labels));
    RETURN_IF_ERROR(Forward(p));
    ASSIGN_OR_RETURN(StepResult r, Loss(p, labels));
    r.loss = r.cross_entropy;
    return r;
  }

  absl::Status Logits(const NamedConstViews& weights, ConstTensorView images,
                      TensorView logits) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, nullptr));
    RETURN_IF_ERROR(CheckShape("cifar10_tutorial", "logits", logits.shape(),
                               p->logits.shape()));
    RETURN_IF_ERROR(Forward(p));
    return backend_->CopyToHost(p->logits.view(), logits);
  }

 private:
  // Validates the inputs (labels may be null), uploads weights and images
  // and returns the plan for the batch size.
  absl::StatusOr<Plan*> Prepare(const NamedConstViews& weights,
                                ConstTensorView images,
                                const absl::Span<const int32_t>* labels) {
    const Shape& s = images.shape();
    if (s.size() != 4 || s[0] <= 0 || s[1] != kChannels || s[2] != kSize ||
        s[3] != kSize) {
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
        if ((*labels)[i] < 0 || (*labels)[i] >= kClasses) {
          return absl::InvalidArgumentError(
              absl::StrCat("cifar10_tutorial: label ", (*labels)[i],
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
    Backend* b = backend_;
    const DeviceVariables& v = *vars_;
    RETURN_IF_ERROR(p->conv1->Forward(p->x.view(), v.weight(kConv1W),
                                      v.weight(kConv1B), p->a1.view()));
    RETURN_IF_ERROR(b->ReluForward(p->a1.view(), p->a1.view()));
    RETURN_IF_ERROR(p->pool1->Forward(p->a1.view(), p->p1.view()));
    RETURN_IF_ERROR(p->norm1->Forward(p->p1.view(), p->n1.view()));
    RETURN_IF_ERROR(p->conv2->Forward(p->n1.view(), v.weight(kConv2W),
                                      v.weight(kConv2B), p->a2.view()));
    RETURN_IF_ERROR(b->ReluForward(p->a2.view(), p->a2.view()));
    RETURN_IF_ERROR(p->norm2->Forward(p->a2.view(), p->n2.view()));
    RETURN_IF_ERROR(p->pool2->Forward(p->n2.view(), p->p2.view()));
    RETURN_IF_ERROR(p->local3->Forward(Flat(p->p2), v.weight(kLocal3W),
                                       v.weight(kLocal3B), p->h3.view()));
    RETURN_IF_ERROR(b->ReluForward(p->h3.view(), p->h3.view()));
    RETURN_IF_ERROR(p->local4->Forward(p->h3.view(), v.weight(kLocal4W),
                                       v.weight(kLocal4B), p->h4.view()));
    RETURN_IF_ERROR(b->ReluForward(p->h4.view(), p->h4.view()));
    return p->softmax->Forward(p->h4.view(), v.weight(kSoftmaxW),
                               v.weight(kSoftmaxB), p->logits.view());
  }

  // Cross-entropy and accuracy; writes d_logits.
  absl::StatusOr<StepResult> Loss(Plan* p, absl::Span<const int32_t> labels) {
    ASSIGN_OR_RETURN(
        CrossEntropyResult ce,
        p->xent->Run(p->logits.view(), labels, p->d_logits.view()));
    StepResult r;
    r.cross_entropy = ce.loss;
    r.correct = ce.correct;
    r.examples = p->batch;
    return r;
  }

  absl::Status Backward(Plan* p) {
    Backend* b = backend_;
    DeviceVariables& v = *vars_;
    RETURN_IF_ERROR(p->softmax->BackwardWeights(
        p->h4.view(), p->d_logits.view(), v.gradient(kSoftmaxW),
        v.gradient(kSoftmaxB)));
    RETURN_IF_ERROR(p->softmax->BackwardData(
        p->d_logits.view(), v.weight(kSoftmaxW), p->d_h4.view()));
    RETURN_IF_ERROR(
        b->ReluBackward(p->h4.view(), p->d_h4.view(), p->d_h4.view()));
    RETURN_IF_ERROR(p->local4->BackwardWeights(p->h3.view(), p->d_h4.view(),
                                               v.gradient(kLocal4W),
                                               v.gradient(kLocal4B)));
    RETURN_IF_ERROR(p->local4->BackwardData(p->d_h4.view(), v.weight(kLocal4W),
                                            p->d_h3.view()));
    RETURN_IF_ERROR(
        b->ReluBackward(p->h3.view(), p->d_h3.view(), p->d_h3.view()));
    RETURN_IF_ERROR(p->local3->BackwardWeights(Flat(p->p2), p->d_h3.view(),
                                               v.gradient(kLocal3W),
                                               v.gradient(kLocal3B)));
    RETURN_IF_ERROR(
        p->local3->BackwardData(p->d_h3.view(), v.weight(kLocal3W),
                                p->d_p2.view().Reshaped({p->batch, kFlat})));
    RETURN_IF_ERROR(p->pool2->Backward(p->n2.view(), p->p2.view(),
                                       p->d_p2.view(), p->d_n2.view()));
    RETURN_IF_ERROR(p->norm2->Backward(p->a2.view(), p->n2.view(),
                                       p->d_n2.view(), p->d_a2.view()));
    RETURN_IF_ERROR(
        b->ReluBackward(p->a2.view(), p->d_a2.view(), p->d_a2.view()));
    RETURN_IF_ERROR(p->conv2->BackwardFilter(p->n1.view(), p->d_a2.view(),
                                             v.gradient(kConv2W),
                                             v.gradient(kConv2B)));
    RETURN_IF_ERROR(p->conv2->BackwardData(p->d_a2.view(), v.weight(kConv2W),
                                           p->d_n1.view()));
    RETURN_IF_ERROR(p->norm1->Backward(p->p1.view(), p->n1.view(),
                                       p->d_n1.view(), p->d_p1.view()));
    RETURN_IF_ERROR(p->pool1->Backward(p->a1.view(), p->p1.view(),
                                       p->d_p1.view(), p->d_a1.view()));
    RETURN_IF_ERROR(
        b->ReluBackward(p->a1.view(), p->d_a1.view(), p->d_a1.view()));
    // conv1's input is the images: no gradient for it.
    return p->conv1->BackwardFilter(p->x.view(), p->d_a1.view(),
                                    v.gradient(kConv1W), v.gradient(kConv1B));
  }

  static ConstDeviceView Flat(const DeviceTensor& pooled) {
    return pooled.view().Reshaped({pooled.shape()[0], kFlat});
  }

  Backend* const backend_;  // Not owned.
  std::unique_ptr<DeviceVariables> vars_;
  std::map<int64_t, std::unique_ptr<Plan>> plans_;  // by batch size
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateCifar10Tutorial(Backend* backend) {
  std::vector<VariableSpec> specs = Cifar10TutorialVariables();
  if (specs.size() != kNumVars) {
    return absl::InternalError("cifar10_tutorial: unexpected variable list");
  }
  for (int i = 0; i < kNumVars; ++i) {
    if (specs[i].name != kVarNames[i]) {
      return absl::InternalError(
          absl::StrCat("cifar10_tutorial: variable ", i, " is '", specs[i].name,
                       "', expected '", kVarNames[i], "'"));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceVariables> vars,
                   DeviceVariables::Create(std::move(specs), backend));
  return std::unique_ptr<Model>(
      std::make_unique<Cifar10Tutorial>(backend, std::move(vars)));
}

}  // namespace psgd
