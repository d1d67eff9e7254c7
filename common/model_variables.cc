#include "common/model_variables.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace psgd {

int64_t TotalParameters(const std::vector<VariableSpec>& specs) {
  int64_t n = 0;
  for (const VariableSpec& s : specs) n += NumElements(s.shape);
  return n;
}

const char* VariableKindName(VariableKind kind) {
  switch (kind) {
    case VariableKind::kParameter:
      return "parameter";
    case VariableKind::kRunningStatistic:
      return "running statistic";
  }
  return "unknown";
}

void FoldRunningStatistic(const float* running, const float* batch, int64_t n,
                          float* out) {
  const float keep = 1.0f - kBatchNormMomentum;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = keep * running[i] + kBatchNormMomentum * batch[i];
  }
}

absl::optional<std::string> FirstUnknownVariable(
    const std::vector<std::string>& names,
    const std::vector<VariableSpec>& specs) {
  absl::flat_hash_set<std::string> known;
  for (const VariableSpec& s : specs) known.insert(s.name);
  for (const std::string& n : names) {
    if (!known.contains(n)) return n;
  }
  return absl::nullopt;
}

absl::Status ValidateVariableSpecs(const std::vector<VariableSpec>& specs) {
  absl::flat_hash_set<std::string> seen;
  for (const VariableSpec& s : specs) {
    if (s.name.empty()) {
      return absl::InvalidArgumentError("a variable has an empty name");
    }
    if (!seen.insert(s.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", s.name, "' appears twice"));
    }
    if (absl::Status st = ValidateShape(s.shape); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", s.name, "': ", st.message()));
    }
  }
  return absl::OkStatus();
}

std::vector<VariableSpec> Cifar10TutorialVariables() {
  using I = Initializer;
  // 24x24 input; two 3x3 stride-2 SAME poolings give 6x6x64 = 2304 inputs
  // to local3.
  return {
      {"conv1/weights", {64, 3, 5, 5}, I::TruncatedNormal(5e-2f)},
      {"conv1/biases", {64}, I::Constant(0.0f)},
      {"conv2/weights", {64, 64, 5, 5}, I::TruncatedNormal(5e-2f)},
      {"conv2/biases", {64}, I::Constant(0.1f)},
      {"local3/weights", {2304, 384}, I::TruncatedNormal(0.04f)},
      {"local3/biases", {384}, I::Constant(0.1f)},
      {"local4/weights", {384, 192}, I::TruncatedNormal(0.04f)},
      {"local4/biases", {192}, I::Constant(0.1f)},
      {"softmax_linear/weights", {192, 10}, I::TruncatedNormal(1.0f / 192.0f)},
      {"softmax_linear/biases", {10}, I::Constant(0.0f)},
  };
}

std::vector<VariableSpec> Cifar10LinearVariables() {
  using I = Initializer;
  return {
      {"linear/weights", {3 * 24 * 24, 10}, I::TruncatedNormal(1e-2f)},
      {"linear/biases", {10}, I::Constant(0.0f)},
  };
}

}  // namespace psgd
