#include "worker/models/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/models/cifar10_linear.h"
#include "worker/models/cifar10_tutorial.h"

namespace psgd {
namespace {

struct ModelEntry {
  const char* name;
  std::vector<VariableSpec> (*variables)();
  absl::StatusOr<std::unique_ptr<Model>> (*create)(Backend* backend);
};

constexpr ModelEntry kModels[] = {
    {"cifar10_tutorial", &Cifar10TutorialVariables, &CreateCifar10Tutorial},
    {"cifar10_linear", &Cifar10LinearVariables, &CreateCifar10Linear},
};

absl::StatusOr<const ModelEntry*> Find(absl::string_view name) {
  for (const ModelEntry& m : kModels) {
    if (name == m.name) return &m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model '", name,
                   "' (known: ", absl::StrJoin(ModelNames(), ", "), ")"));
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const ModelEntry& m : kModels) names.push_back(m.name);
  return names;
}

absl::StatusOr<std::vector<VariableSpec>> ModelVariables(
    absl::string_view name) {
  absl::StatusOr<const ModelEntry*> m = Find(name);
  if (!m.ok()) return m.status();
  return (*m)->variables();
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(absl::string_view name,
                                                   Backend* backend) {
  absl::StatusOr<const ModelEntry*> m = Find(name);
  if (!m.ok()) return m.status();
  return (*m)->create(backend);
}

}  // namespace psgd
