#include "worker/train/tutorial_trainer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/models/cifar10_tutorial_net.h"

namespace psgd {
namespace {

using Net = Cifar10TutorialNet;

// Each variable starts at a multiple of this many floats (256 bytes).
constexpr int64_t kAlignment = 64;

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
  RETURN_IF_ERROR(Net::CheckVariables(specs, "tutorial trainer"));
  std::unique_ptr<TutorialTrainer> t(
      new TutorialTrainer(backend, std::move(specs)));
  ASSIGN_OR_RETURN(t->weights_, backend->Allocate({t->flat_size_}));
  ASSIGN_OR_RETURN(t->gradients_, backend->Allocate({t->flat_size_}));
  ASSIGN_OR_RETURN(t->net_, Net::Create(backend, batch));
  return t;
}

int64_t TutorialTrainer::batch() const { return net_->batch(); }

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
                             net_->images().shape()));
  RETURN_IF_ERROR(backend_->CopyToDevice(images, net_->images()));
  return ComputeGradients(ConstDeviceView(net_->images()), labels);
}

absl::StatusOr<StepResult> TutorialTrainer::ComputeGradients(
    ConstDeviceView images, absl::Span<const int32_t> labels) {
  RETURN_IF_ERROR(CheckShape("tutorial trainer", "images", images.shape(),
                             net_->images().shape()));
  // Views of the flat buffers, by variable.
  Net::Weights w;
  Net::Gradients g;
  for (int v = 0; v < Net::kNumVars; ++v) {
    w[v] =
        ConstDeviceView(weights_.view().data() + offsets_[v], specs_[v].shape);
    g[v] = DeviceView(gradients_.view().data() + offsets_[v], specs_[v].shape);
  }
  RETURN_IF_ERROR(net_->Forward(images, w));
  // Loss (validates the labels; waits for the forward pass).
  ASSIGN_OR_RETURN(StepResult r, net_->Loss(labels));
  RETURN_IF_ERROR(net_->Backward(images, w, g));
  ASSIGN_OR_RETURN(r.weight_decay, net_->WeightDecay(w, g));
  r.loss = r.cross_entropy + r.weight_decay;
  return r;
}

}  // namespace psgd
