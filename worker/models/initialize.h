// Initial values of a model's variables from their specs (constant, or
// TensorFlow's truncated normal: redrawn beyond two standard deviations).
// Each variable's stream is seeded by (seed, its name), so values do not
// depend on the order of the list.
//
// Thread-safety: a pure function.
#ifndef PSGD_WORKER_MODELS_INITIALIZE_H_
#define PSGD_WORKER_MODELS_INITIALIZE_H_

#include <cstdint>
#include <vector>

#include "common/model_variables.h"
#include "worker/models/model.h"

namespace psgd {

// One tensor per spec. Requires ValidateVariableSpecs(specs).ok().
NamedTensors InitialValues(const std::vector<VariableSpec>& specs,
                           uint64_t seed);

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_INITIALIZE_H_
