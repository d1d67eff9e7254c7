// Models by name, so that flags and configs can pick one. The table is a
// constant list in registry.cc; adding a model is one line there (see
// docs/COMPUTE.md, "Adding a model").
//
// Thread-safety: all functions may be called from any thread.
#ifndef PSGD_WORKER_MODELS_REGISTRY_H_
#define PSGD_WORKER_MODELS_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model_variables.h"
#include "worker/backend/backend.h"
#include "worker/models/model.h"
#include "worker/models/network.h"

namespace psgd {

// "cifar10_tutorial", ...
std::vector<std::string> ModelNames();

struct ModelInfo {
  std::string name;
  int64_t parameters = 0;  // trainable (TotalParameters of the variables)
};
// Every model with its size, in the registry's order (what `worker
// --list_models` prints).
std::vector<ModelInfo> ListModels();

// 1234567 -> "1,234,567".
std::string FormatCount(int64_t n);

// The variables of a model, without a backend. INVALID_ARGUMENT for an
// unknown name, listing the known ones with their sizes.
absl::StatusOr<std::vector<VariableSpec>> ModelVariables(
    absl::string_view name);

// The model's non-trainable state (batch norm's running statistics,
// Model::state()), without a backend; empty for a model without.
// INVALID_ARGUMENT for an unknown name.
absl::StatusOr<std::vector<VariableSpec>> ModelState(absl::string_view name);

// The layer graph of a layer-graph network (resnet20, ...).
// INVALID_ARGUMENT for an unknown name; NOT_FOUND for a hand-written model
// (cifar10_tutorial, cifar10_linear), which has none.
absl::StatusOr<NetworkSpec> ModelNetworkSpec(absl::string_view name);

// The model on `backend` (not owned; must outlive the model).
// INVALID_ARGUMENT for an unknown name.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(absl::string_view name,
                                                   Backend* backend);

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_REGISTRY_H_
