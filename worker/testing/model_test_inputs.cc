#include "worker/testing/model_test_inputs.h"

#include <string>

#include "common/model_variables.h"
#include "worker/models/initialize.h"
#include "worker/random.h"

namespace psgd {
namespace testing {

NamedTensors TutorialWeights(uint64_t seed) {
  const std::vector<VariableSpec> specs = Cifar10TutorialVariables();
  NamedTensors w = InitialValues(specs, seed);
  // In the variable list's order: the map's own order changes from process
  // to process (absl's hash is seeded per process).
  Rng rng(seed + 1);
  for (const VariableSpec& s : specs) {
    if (s.name.find("biases") == std::string::npos) continue;
    for (float& v : w.at(s.name).span()) {
      v = static_cast<float>(rng.Uniform(-0.2, 0.2));
    }
  }
  return w;
}

Tensor RandomImages(int64_t n, uint64_t seed, double scale) {
  Tensor t({n, 3, 24, 24});
  Rng rng(seed);
  for (float& v : t.span()) v = static_cast<float>(rng.Uniform(-scale, scale));
  return t;
}

std::vector<int32_t> RandomLabels(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> labels(n);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng.UniformInt(10));
  return labels;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

}  // namespace testing
}  // namespace psgd
