// A model's variables and their gradients in backend memory, with the
// checked copies to and from the host name-keyed maps of the Model API.
// Models own one and index it by the position in their variable list.
//
// Thread-safety: one thread at a time, like the backend.
#ifndef PSGD_WORKER_MODELS_DEVICE_VARIABLES_H_
#define PSGD_WORKER_MODELS_DEVICE_VARIABLES_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_variables.h"
#include "worker/backend/backend.h"
#include "worker/models/model.h"

namespace psgd {

class DeviceVariables {
 public:
  // Allocates a weight and a gradient tensor per spec on `backend` (not
  // owned). INVALID_ARGUMENT for invalid specs.
  static absl::StatusOr<std::unique_ptr<DeviceVariables>> Create(
      std::vector<VariableSpec> specs, Backend* backend);

  const std::vector<VariableSpec>& specs() const { return specs_; }
  ConstDeviceView weight(int i) const { return weights_[i].view(); }
  // For values the model itself updates (batch norm's running statistics).
  DeviceView mutable_weight(int i) { return weights_[i].view(); }
  DeviceView gradient(int i) { return gradients_[i].view(); }

  // OK when `weights` has exactly one view per spec, of the spec's shape;
  // INVALID_ARGUMENT naming the first missing, unknown or misshapen one.
  absl::Status Validate(const NamedConstViews& weights) const;
  // Validate, then copy every weight to the backend.
  absl::Status Upload(const NamedConstViews& weights);
  // Copies every weight to `out`, reusing tensors of the right shape.
  absl::Status DownloadWeights(NamedTensors* out);
  // Copies every gradient to `out`, reusing tensors of the right shape.
  absl::Status DownloadGradients(NamedTensors* out);
  // Variable i alone (overlap: layer by layer), after Validate. Upload's and
  // DownloadGradients' copies are these.
  absl::Status UploadWeight(int i, const NamedConstViews& weights);
  absl::Status DownloadGradient(int i, NamedTensors* out);
  // Makes `out` hold a tensor of the right shape for every variable.
  void ShapeGradients(NamedTensors* out) const;

 private:
  DeviceVariables(std::vector<VariableSpec> specs, Backend* backend)
      : specs_(std::move(specs)), backend_(backend) {}

  const std::vector<VariableSpec> specs_;
  Backend* const backend_;  // Not owned.
  std::vector<DeviceTensor> weights_;
  std::vector<DeviceTensor> gradients_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_DEVICE_VARIABLES_H_
