#include "worker/models/cifar10_tutorial_net.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

constexpr const char* kVarNames[Cifar10TutorialNet::kNumVars] = {
    "conv1/weights",        "conv1/biases",   "conv2/weights",
    "conv2/biases",         "local3/weights", "local3/biases",
    "local4/weights",       "local4/biases",  "softmax_linear/weights",
    "softmax_linear/biases"};

constexpr int64_t kFilters = 64, kKernel = 5;
constexpr int64_t kPooled1 = 12, kPooled2 = 6;
constexpr int64_t kLocal3 = 384, kLocal4 = 192;
constexpr int64_t kFlat = kFilters * kPooled2 * kPooled2;  // 2304
constexpr float kWeightDecay = 0.004f;

}  // namespace

absl::Status Cifar10TutorialNet::CheckVariables(
    const std::vector<VariableSpec>& specs, absl::string_view who) {
  if (specs.size() != kNumVars) {
    return absl::InternalError(absl::StrCat(who, ": unexpected variable list"));
  }
  for (int i = 0; i < kNumVars; ++i) {
    if (specs[i].name != kVarNames[i]) {
      return absl::InternalError(absl::StrCat(who, ": variable ", i, " is '",
                                              specs[i].name, "', expected '",
                                              kVarNames[i], "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Cifar10TutorialNet>> Cifar10TutorialNet::Create(
    Backend* b, int64_t n) {
  std::unique_ptr<Cifar10TutorialNet> p(new Cifar10TutorialNet(b, n));
  const LrnParams lrn;  // the tutorial's constants are the defaults
  ASSIGN_OR_RETURN(p->conv1_, b->CreateConv2d({n, kChannels, kSize, kSize,
                                               kFilters, kKernel, kKernel}));
  ASSIGN_OR_RETURN(p->pool1_,
                   b->CreateMaxPool({n, kFilters, kSize, kSize, 3, 2}));
  ASSIGN_OR_RETURN(p->norm1_,
                   b->CreateLrn({n, kFilters, kPooled1, kPooled1, lrn}));
  ASSIGN_OR_RETURN(p->conv2_, b->CreateConv2d({n, kFilters, kPooled1, kPooled1,
                                               kFilters, kKernel, kKernel}));
  ASSIGN_OR_RETURN(p->norm2_,
                   b->CreateLrn({n, kFilters, kPooled1, kPooled1, lrn}));
  ASSIGN_OR_RETURN(p->pool2_,
                   b->CreateMaxPool({n, kFilters, kPooled1, kPooled1, 3, 2}));
  ASSIGN_OR_RETURN(p->local3_, b->CreateDense({n, kFlat, kLocal3}));
  ASSIGN_OR_RETURN(p->local4_, b->CreateDense({n, kLocal3, kLocal4}));
  ASSIGN_OR_RETURN(p->softmax_, b->CreateDense({n, kLocal4, kClasses}));
  ASSIGN_OR_RETURN(p->xent_, b->CreateSoftmaxCrossEntropy({n, kClasses}));

  const Shape image = {n, kChannels, kSize, kSize};
  const Shape big = {n, kFilters, kSize, kSize};
  const Shape mid = {n, kFilters, kPooled1, kPooled1};
  const Shape small = {n, kFilters, kPooled2, kPooled2};
  const std::pair<DeviceTensor*, Shape> buffers[] = {
      {&p->x_, image},
      {&p->a1_, big},
      {&p->p1_, mid},
      {&p->n1_, mid},
      {&p->a2_, mid},
      {&p->n2_, mid},
      {&p->p2_, small},
      {&p->h3_, {n, kLocal3}},
      {&p->h4_, {n, kLocal4}},
      {&p->logits_, {n, kClasses}},
      {&p->d_logits_, {n, kClasses}},
      {&p->d_h4_, {n, kLocal4}},
      {&p->d_h3_, {n, kLocal3}},
      {&p->d_p2_, small},
      {&p->d_n2_, mid},
      {&p->d_a2_, mid},
      {&p->d_n1_, mid},
      {&p->d_p1_, mid},
      {&p->d_a1_, big},
  };
  for (const auto& [tensor, shape] : buffers) {
    ASSIGN_OR_RETURN(*tensor, b->Allocate(shape));
  }
  return p;
}

Cifar10TutorialNet::~Cifar10TutorialNet() = default;

ConstDeviceView Cifar10TutorialNet::Flat(const DeviceTensor& pooled) const {
  return pooled.view().Reshaped({batch_, kFlat});
}

absl::Status Cifar10TutorialNet::Forward(ConstDeviceView images,
                                         const Weights& w,
                                         const LayerHook& before) {
  Backend* b = backend_;
  auto layer = [&before](Var v) {
    return before ? before(v) : absl::OkStatus();
  };
  RETURN_IF_ERROR(layer(kConv1W));
  RETURN_IF_ERROR(conv1_->Forward(images, w[kConv1W], w[kConv1B], a1_.view()));
  RETURN_IF_ERROR(b->ReluForward(a1_.view(), a1_.view()));
  RETURN_IF_ERROR(pool1_->Forward(a1_.view(), p1_.view()));
  RETURN_IF_ERROR(norm1_->Forward(p1_.view(), n1_.view()));
  RETURN_IF_ERROR(layer(kConv2W));
  RETURN_IF_ERROR(
      conv2_->Forward(n1_.view(), w[kConv2W], w[kConv2B], a2_.view()));
  RETURN_IF_ERROR(b->ReluForward(a2_.view(), a2_.view()));
  RETURN_IF_ERROR(norm2_->Forward(a2_.view(), n2_.view()));
  RETURN_IF_ERROR(pool2_->Forward(n2_.view(), p2_.view()));
  RETURN_IF_ERROR(layer(kLocal3W));
  RETURN_IF_ERROR(
      local3_->Forward(Flat(p2_), w[kLocal3W], w[kLocal3B], h3_.view()));
  RETURN_IF_ERROR(b->ReluForward(h3_.view(), h3_.view()));
  RETURN_IF_ERROR(layer(kLocal4W));
  RETURN_IF_ERROR(
      local4_->Forward(h3_.view(), w[kLocal4W], w[kLocal4B], h4_.view()));
  RETURN_IF_ERROR(b->ReluForward(h4_.view(), h4_.view()));
  RETURN_IF_ERROR(layer(kSoftmaxW));
  return softmax_->Forward(h4_.view(), w[kSoftmaxW], w[kSoftmaxB],
                           logits_.view());
}

absl::StatusOr<StepResult> Cifar10TutorialNet::Loss(
    absl::Span<const int32_t> labels) {
  ASSIGN_OR_RETURN(CrossEntropyResult ce,
                   xent_->Run(logits_.view(), labels, d_logits_.view()));
  StepResult r;
  r.cross_entropy = ce.loss;
  r.correct = ce.correct;
  r.examples = batch_;
  return r;
}

absl::Status Cifar10TutorialNet::Backward(ConstDeviceView images,
                                          const Weights& w, const Gradients& g,
                                          const LayerHook& after) {
  Backend* b = backend_;
  auto layer = [&after](Var v) { return after ? after(v) : absl::OkStatus(); };
  RETURN_IF_ERROR(softmax_->BackwardWeights(h4_.view(), d_logits_.view(),
                                            g[kSoftmaxW], g[kSoftmaxB]));
  RETURN_IF_ERROR(layer(kSoftmaxW));
  RETURN_IF_ERROR(
      softmax_->BackwardData(d_logits_.view(), w[kSoftmaxW], d_h4_.view()));
  RETURN_IF_ERROR(b->ReluBackward(h4_.view(), d_h4_.view(), d_h4_.view()));
  RETURN_IF_ERROR(local4_->BackwardWeights(h3_.view(), d_h4_.view(),
                                           g[kLocal4W], g[kLocal4B]));
  RETURN_IF_ERROR(layer(kLocal4W));
  RETURN_IF_ERROR(
      local4_->BackwardData(d_h4_.view(), w[kLocal4W], d_h3_.view()));
  RETURN_IF_ERROR(b->ReluBackward(h3_.view(), d_h3_.view(), d_h3_.view()));
  RETURN_IF_ERROR(local3_->BackwardWeights(Flat(p2_), d_h3_.view(), g[kLocal3W],
                                           g[kLocal3B]));
  RETURN_IF_ERROR(layer(kLocal3W));
  RETURN_IF_ERROR(local3_->BackwardData(
      d_h3_.view(), w[kLocal3W], d_p2_.view().Reshaped({batch_, kFlat})));
  RETURN_IF_ERROR(
      pool2_->Backward(n2_.view(), p2_.view(), d_p2_.view(), d_n2_.view()));
  RETURN_IF_ERROR(
      norm2_->Backward(a2_.view(), n2_.view(), d_n2_.view(), d_a2_.view()));
  RETURN_IF_ERROR(b->ReluBackward(a2_.view(), d_a2_.view(), d_a2_.view()));
  RETURN_IF_ERROR(
      conv2_->BackwardFilter(n1_.view(), d_a2_.view(), g[kConv2W], g[kConv2B]));
  RETURN_IF_ERROR(layer(kConv2W));
  RETURN_IF_ERROR(conv2_->BackwardData(d_a2_.view(), w[kConv2W], d_n1_.view()));
  RETURN_IF_ERROR(
      norm1_->Backward(p1_.view(), n1_.view(), d_n1_.view(), d_p1_.view()));
  RETURN_IF_ERROR(
      pool1_->Backward(a1_.view(), p1_.view(), d_p1_.view(), d_a1_.view()));
  RETURN_IF_ERROR(b->ReluBackward(a1_.view(), d_a1_.view(), d_a1_.view()));
  // conv1's input is the images: no gradient for it.
  RETURN_IF_ERROR(
      conv1_->BackwardFilter(images, d_a1_.view(), g[kConv1W], g[kConv1B]));
  return layer(kConv1W);
}

absl::StatusOr<double> Cifar10TutorialNet::WeightDecay(const Weights& w,
                                                       const Gradients& g) {
  double total = 0.0;
  for (Var v : {kLocal3W, kLocal4W}) {
    ASSIGN_OR_RETURN(double decay, WeightDecayOf(v, w, g));
    total += decay;
  }
  return total;
}

absl::StatusOr<double> Cifar10TutorialNet::WeightDecayOf(Var v,
                                                         const Weights& w,
                                                         const Gradients& g) {
  if (v != kLocal3W && v != kLocal4W) return 0.0;
  return backend_->L2WeightDecay(w[v], kWeightDecay, g[v]);
}

}  // namespace psgd
