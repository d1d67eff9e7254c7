#include "worker/models/initialize.h"

#include <cmath>
#include <functional>
#include <string>

#include "worker/random.h"

namespace psgd {
namespace {

uint64_t HashName(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace

NamedTensors InitialValues(const std::vector<VariableSpec>& specs,
                           uint64_t seed) {
  NamedTensors out;
  for (const VariableSpec& s : specs) {
    Tensor t(s.shape);
    if (s.init.kind == Initializer::Kind::kConstant) {
      t.Fill(s.init.value);
    } else {
      Rng rng(DeriveSeed({seed, HashName(s.name)}));
      for (float& v : t.span()) {
        double x;
        do {
          x = rng.Normal();
        } while (std::abs(x) > 2.0);
        v = static_cast<float>(x * s.init.stddev);
      }
    }
    out.emplace(s.name, std::move(t));
  }
  return out;
}

}  // namespace psgd
