#include "worker/gpu/tutorial_trainer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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
// Each variable starts at a multiple of this many floats (256 bytes).
constexpr int64_t kAlignment = 64;

}  // namespace

struct TutorialTrainer::Plan {
  int64_t batch = 0;
  std::unique_ptr<Conv2dOp> conv1, conv2;
  std::unique_ptr<MaxPoolOp> pool1, pool2;
  std::unique_ptr<LrnOp> norm1, norm2;
  std::unique_ptr<DenseOp> local3, local4, softmax;
  std::unique_ptr<SoftmaxCrossEntropyOp> xent;
  DeviceTensor x;  // for host images
  // Forward activations (after the in-place ReLUs where there is one).
  DeviceTensor a1, p1, n1, a2, n2, p2, h3, h4, logits;
  // Gradients of the activations.
  DeviceTensor d_logits, d_h4, d_h3, d_p2, d_n2, d_a2, d_n1, d_p1, d_a1;
};

namespace {

absl::StatusOr<std::unique_ptr<TutorialTrainer::Plan>> MakePlan(Backend* b,
                                                                int64_t n) {
  auto p = std::make_unique<TutorialTrainer::Plan>();
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

ConstDeviceView Flat(const DeviceTensor& pooled) {
  return pooled.view().Reshaped({pooled.shape()[0], kFlat});
}

}  // namespace

TutorialTrainer::TutorialTrainer(Backend* backend,
                                 std::vector<VariableSpec> specs)
    : backend_(backend), specs_(std::move(specs)) {
  for (const VariableSpec& s : specs_) {
    offsets_.push_back(flat_size_);
    flat_size_ +=
        (NumElements(s.shape) + kAlignment - 1) / kAlignment * kAlignment;
  }
}

TutorialTrainer::~TutorialTrainer() = default;

absl::StatusOr<std::unique_ptr<TutorialTrainer>> TutorialTrainer::Create(
    Backend* backend, int64_t batch) {
  if (batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tutorial trainer: batch is ", batch, ", must be >= 1"));
  }
  std::vector<VariableSpec> specs = Cifar10TutorialVariables();
  if (specs.size() != kNumVars) {
    return absl::InternalError("tutorial trainer: unexpected variable list");
  }
  for (int i = 0; i < kNumVars; ++i) {
    if (specs[i].name != kVarNames[i]) {
      return absl::InternalError(
          absl::StrCat("tutorial trainer: variable ", i, " is '", specs[i].name,
                       "', expected '", kVarNames[i], "'"));
    }
  }
  std::unique_ptr<TutorialTrainer> t(
      new TutorialTrainer(backend, std::move(specs)));
  ASSIGN_OR_RETURN(t->weights_, backend->Allocate({t->flat_size_}));
  ASSIGN_OR_RETURN(t->gradients_, backend->Allocate({t->flat_size_}));
  ASSIGN_OR_RETURN(t->plan_, MakePlan(backend, batch));
  return t;
}

int64_t TutorialTrainer::batch() const { return plan_->batch; }

DeviceView TutorialTrainer::weights() { return weights_.view(); }
ConstDeviceView TutorialTrainer::gradients() const { return gradients_.view(); }

absl::Status TutorialTrainer::SetWeights(const NamedConstViews& weights) {
  for (const VariableSpec& s : specs_) {
    auto it = weights.find(s.name);
    if (it == weights.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights: variable '", s.name, "' is missing"));
    }
    if (it->second.shape() != s.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights: variable '", s.name, "' has shape ",
                       ShapeToString(it->second.shape()), ", expected ",
                       ShapeToString(s.shape)));
    }
  }
  if (weights.size() != specs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("weights: ", weights.size(),
                                                   " variables, the model has ",
                                                   specs_.size()));
  }
  for (size_t i = 0; i < specs_.size(); ++i) {
    DeviceView dst(weights_.view().data() + offsets_[i], specs_[i].shape);
    RETURN_IF_ERROR(backend_->CopyToDevice(weights.at(specs_[i].name), dst));
  }
  return absl::OkStatus();
}

absl::Status TutorialTrainer::GetWeights(NamedTensors* out) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    Tensor& t = (*out)[specs_[i].name];
    if (t.shape() != specs_[i].shape) t = Tensor(specs_[i].shape);
    ConstDeviceView src(weights_.view().data() + offsets_[i], specs_[i].shape);
    RETURN_IF_ERROR(backend_->CopyToHost(src, t.view()));
  }
  return absl::OkStatus();
}

absl::Status TutorialTrainer::GetGradients(NamedTensors* out) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    Tensor& t = (*out)[specs_[i].name];
    if (t.shape() != specs_[i].shape) t = Tensor(specs_[i].shape);
    ConstDeviceView src(gradients_.view().data() + offsets_[i],
                        specs_[i].shape);
    RETURN_IF_ERROR(backend_->CopyToHost(src, t.view()));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> TutorialTrainer::ComputeGradients(
    ConstTensorView images, absl::Span<const int32_t> labels) {
  RETURN_IF_ERROR(CheckShape("tutorial trainer", "images", images.shape(),
                             plan_->x.shape()));
  RETURN_IF_ERROR(backend_->CopyToDevice(images, plan_->x.view()));
  return ComputeGradients(ConstDeviceView(plan_->x.view()), labels);
}

absl::StatusOr<StepResult> TutorialTrainer::ComputeGradients(
    ConstDeviceView images, absl::Span<const int32_t> labels) {
  Plan* p = plan_.get();
  RETURN_IF_ERROR(
      CheckShape("tutorial trainer", "images", images.shape(), p->x.shape()));
  Backend* b = backend_;
  // Views of the flat buffers, by variable.
  auto w = [&](Var v) {
    return ConstDeviceView(weights_.view().data() + offsets_[v],
                           specs_[v].shape);
  };
  auto g = [&](Var v) {
    return DeviceView(gradients_.view().data() + offsets_[v], specs_[v].shape);
  };

  // Forward.
  RETURN_IF_ERROR(
      p->conv1->Forward(images, w(kConv1W), w(kConv1B), p->a1.view()));
  RETURN_IF_ERROR(b->ReluForward(p->a1.view(), p->a1.view()));
  RETURN_IF_ERROR(p->pool1->Forward(p->a1.view(), p->p1.view()));
  RETURN_IF_ERROR(p->norm1->Forward(p->p1.view(), p->n1.view()));
  RETURN_IF_ERROR(
      p->conv2->Forward(p->n1.view(), w(kConv2W), w(kConv2B), p->a2.view()));
  RETURN_IF_ERROR(b->ReluForward(p->a2.view(), p->a2.view()));
  RETURN_IF_ERROR(p->norm2->Forward(p->a2.view(), p->n2.view()));
  RETURN_IF_ERROR(p->pool2->Forward(p->n2.view(), p->p2.view()));
  RETURN_IF_ERROR(
      p->local3->Forward(Flat(p->p2), w(kLocal3W), w(kLocal3B), p->h3.view()));
  RETURN_IF_ERROR(b->ReluForward(p->h3.view(), p->h3.view()));
  RETURN_IF_ERROR(
      p->local4->Forward(p->h3.view(), w(kLocal4W), w(kLocal4B), p->h4.view()));
  RETURN_IF_ERROR(b->ReluForward(p->h4.view(), p->h4.view()));
  RETURN_IF_ERROR(p->softmax->Forward(p->h4.view(), w(kSoftmaxW), w(kSoftmaxB),
                                      p->logits.view()));

  // Loss (validates the labels; waits for the forward pass).
  ASSIGN_OR_RETURN(CrossEntropyResult ce,
                   p->xent->Run(p->logits.view(), labels, p->d_logits.view()));
  StepResult r;
  r.cross_entropy = ce.loss;
  r.correct = ce.correct;
  r.examples = p->batch;

  // Backward.
  RETURN_IF_ERROR(p->softmax->BackwardWeights(p->h4.view(), p->d_logits.view(),
                                              g(kSoftmaxW), g(kSoftmaxB)));
  RETURN_IF_ERROR(p->softmax->BackwardData(p->d_logits.view(), w(kSoftmaxW),
                                           p->d_h4.view()));
  RETURN_IF_ERROR(
      b->ReluBackward(p->h4.view(), p->d_h4.view(), p->d_h4.view()));
  RETURN_IF_ERROR(p->local4->BackwardWeights(p->h3.view(), p->d_h4.view(),
                                             g(kLocal4W), g(kLocal4B)));
  RETURN_IF_ERROR(
      p->local4->BackwardData(p->d_h4.view(), w(kLocal4W), p->d_h3.view()));
  RETURN_IF_ERROR(
      b->ReluBackward(p->h3.view(), p->d_h3.view(), p->d_h3.view()));
  RETURN_IF_ERROR(p->local3->BackwardWeights(Flat(p->p2), p->d_h3.view(),
                                             g(kLocal3W), g(kLocal3B)));
  RETURN_IF_ERROR(p->local3->BackwardData(
      p->d_h3.view(), w(kLocal3W), p->d_p2.view().Reshaped({p->batch, kFlat})));
  RETURN_IF_ERROR(p->pool2->Backward(p->n2.view(), p->p2.view(), p->d_p2.view(),
                                     p->d_n2.view()));
  RETURN_IF_ERROR(p->norm2->Backward(p->a2.view(), p->n2.view(), p->d_n2.view(),
                                     p->d_a2.view()));
  RETURN_IF_ERROR(
      b->ReluBackward(p->a2.view(), p->d_a2.view(), p->d_a2.view()));
  RETURN_IF_ERROR(p->conv2->BackwardFilter(p->n1.view(), p->d_a2.view(),
                                           g(kConv2W), g(kConv2B)));
  RETURN_IF_ERROR(
      p->conv2->BackwardData(p->d_a2.view(), w(kConv2W), p->d_n1.view()));
  RETURN_IF_ERROR(p->norm1->Backward(p->p1.view(), p->n1.view(), p->d_n1.view(),
                                     p->d_p1.view()));
  RETURN_IF_ERROR(p->pool1->Backward(p->a1.view(), p->p1.view(), p->d_p1.view(),
                                     p->d_a1.view()));
  RETURN_IF_ERROR(
      b->ReluBackward(p->a1.view(), p->d_a1.view(), p->d_a1.view()));
  // conv1's input is the images: no gradient for it.
  RETURN_IF_ERROR(
      p->conv1->BackwardFilter(images, p->d_a1.view(), g(kConv1W), g(kConv1B)));
  for (Var v : {kLocal3W, kLocal4W}) {
    ASSIGN_OR_RETURN(double decay, b->L2WeightDecay(w(v), kWeightDecay, g(v)));
    r.weight_decay += decay;
  }
  r.loss = r.cross_entropy + r.weight_decay;
  return r;
}

}  // namespace psgd
