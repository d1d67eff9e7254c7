#include "worker/models/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/models/cifar10_linear.h"
#include "worker/models/cifar10_tutorial.h"
#include "worker/models/cifar_networks.h"
#include "worker/models/network_model.h"

namespace psgd {
namespace {

// A model is either hand-written (variables + create) or a layer graph
// (spec, run by network_model.h).
struct ModelEntry {
  const char* name;
  std::vector<VariableSpec> (*variables)();
  absl::StatusOr<std::unique_ptr<Model>> (*create)(Backend* backend);
  absl::StatusOr<NetworkSpec> (*spec)();
};

constexpr ModelEntry kModels[] = {
    {"cifar10_tutorial", &Cifar10TutorialVariables, &CreateCifar10Tutorial,
     nullptr},
    {"cifar10_linear", &Cifar10LinearVariables, &CreateCifar10Linear, nullptr},
    {"resnet20", nullptr, nullptr, [] { return CifarResNet(20); }},
    {"resnet56", nullptr, nullptr, [] { return CifarResNet(56); }},
    {"wrn_16_4", nullptr, nullptr, [] { return WideResNet(16, 4); }},
    {"wrn_28_10", nullptr, nullptr, [] { return WideResNet(28, 10); }},
    {"cnn10", nullptr, nullptr, &Cnn10},
    {"resnet50_cifar", nullptr, nullptr, &ResNet50Cifar},
};

absl::StatusOr<std::vector<VariableSpec>> VariablesOf(const ModelEntry& m) {
  if (m.spec == nullptr) return m.variables();
  absl::StatusOr<NetworkSpec> spec = m.spec();
  if (!spec.ok()) return spec.status();
  return std::move(spec->variables);
}

absl::StatusOr<const ModelEntry*> Find(absl::string_view name) {
  for (const ModelEntry& m : kModels) {
    if (name == m.name) return &m;
  }
  std::vector<std::string> known;
  for (const ModelInfo& m : ListModels()) {
    known.push_back(
        absl::StrCat(m.name, " (", FormatCount(m.parameters), " parameters)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model '", name, "' (known: ", absl::StrJoin(known, ", "), ")"));
}

}  // namespace

std::string FormatCount(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const ModelEntry& m : kModels) names.push_back(m.name);
  return names;
}

std::vector<ModelInfo> ListModels() {
  std::vector<ModelInfo> out;
  for (const ModelEntry& m : kModels) {
    absl::StatusOr<std::vector<VariableSpec>> vars = VariablesOf(m);
    out.push_back({m.name, vars.ok() ? TotalParameters(*vars) : -1});
  }
  return out;
}

absl::StatusOr<std::vector<VariableSpec>> ModelVariables(
    absl::string_view name) {
  absl::StatusOr<const ModelEntry*> m = Find(name);
  if (!m.ok()) return m.status();
  return VariablesOf(**m);
}

absl::StatusOr<std::vector<VariableSpec>> ModelState(absl::string_view name) {
  absl::StatusOr<const ModelEntry*> m = Find(name);
  if (!m.ok()) return m.status();
  if ((*m)->spec == nullptr) return std::vector<VariableSpec>();
  absl::StatusOr<NetworkSpec> spec = (*m)->spec();
  if (!spec.ok()) return spec.status();
  return std::move(spec->state);
}

absl::StatusOr<NetworkSpec> ModelNetworkSpec(absl::string_view name) {
  absl::StatusOr<const ModelEntry*> m = Find(name);
  if (!m.ok()) return m.status();
  if ((*m)->spec == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "model '", name, "' is written by hand, not as a layer graph"));
  }
  return (*m)->spec();
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(absl::string_view name,
                                                   Backend* backend) {
  absl::StatusOr<const ModelEntry*> m = Find(name);
  if (!m.ok()) return m.status();
  if ((*m)->spec == nullptr) return (*m)->create(backend);
  absl::StatusOr<NetworkSpec> spec = (*m)->spec();
  if (!spec.ok()) return spec.status();
  return CreateNetworkModel(std::move(spec).value(), backend);
}

}  // namespace psgd
