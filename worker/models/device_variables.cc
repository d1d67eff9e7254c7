#include "worker/models/device_variables.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {

NamedConstViews ViewsOf(const NamedTensors& tensors) {
  NamedConstViews views;
  for (const auto& [name, tensor] : tensors) views.emplace(name, tensor.view());
  return views;
}

absl::StatusOr<std::unique_ptr<DeviceVariables>> DeviceVariables::Create(
    std::vector<VariableSpec> specs, Backend* backend) {
  RETURN_IF_ERROR(ValidateVariableSpecs(specs));
  std::unique_ptr<DeviceVariables> v(
      new DeviceVariables(std::move(specs), backend));
  for (const VariableSpec& s : v->specs_) {
    ASSIGN_OR_RETURN(DeviceTensor w, backend->Allocate(s.shape));
    ASSIGN_OR_RETURN(DeviceTensor g, backend->Allocate(s.shape));
    v->weights_.push_back(std::move(w));
    v->gradients_.push_back(std::move(g));
  }
  return v;
}

absl::Status DeviceVariables::Validate(const NamedConstViews& weights) const {
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
    for (const auto& [name, view] : weights) {
      bool known = false;
      for (const VariableSpec& s : specs_) known = known || s.name == name;
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat(
            "weights: '", name, "' is not a variable of the model"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status DeviceVariables::Upload(const NamedConstViews& weights) {
  RETURN_IF_ERROR(Validate(weights));
  for (size_t i = 0; i < specs_.size(); ++i) {
    RETURN_IF_ERROR(UploadWeight(static_cast<int>(i), weights));
  }
  return absl::OkStatus();
}

absl::Status DeviceVariables::UploadWeight(int i,
                                           const NamedConstViews& weights) {
  return backend_->CopyToDevice(weights.at(specs_[i].name), weights_[i].view());
}

absl::Status DeviceVariables::DownloadWeights(NamedTensors* out) {
  ShapeGradients(out);
  for (size_t i = 0; i < specs_.size(); ++i) {
    RETURN_IF_ERROR(backend_->CopyToHost(weights_[i].view(),
                                         out->at(specs_[i].name).view()));
  }
  return absl::OkStatus();
}

absl::Status DeviceVariables::DownloadGradients(NamedTensors* out) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    RETURN_IF_ERROR(DownloadGradient(static_cast<int>(i), out));
  }
  return absl::OkStatus();
}

absl::Status DeviceVariables::DownloadGradient(int i, NamedTensors* out) {
  Tensor& t = (*out)[specs_[i].name];
  if (t.shape() != specs_[i].shape) t = Tensor(specs_[i].shape);
  return backend_->CopyToHost(gradients_[i].view(), t.view());
}

void DeviceVariables::ShapeGradients(NamedTensors* out) const {
  for (const VariableSpec& s : specs_) {
    Tensor& t = (*out)[s.name];
    if (t.shape() != s.shape) t = Tensor(s.shape);
  }
}

}  // namespace psgd
