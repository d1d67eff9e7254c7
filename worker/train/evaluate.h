// Test-set evaluation, shared by train_local and the cluster's chief.
//
// Thread-safety: uses the model (one thread at a time) on the caller's
// thread.
#ifndef PSGD_WORKER_TRAIN_EVALUATE_H_
#define PSGD_WORKER_TRAIN_EVALUATE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/data/image_set.h"
#include "worker/models/model.h"

namespace psgd {

// Loss and accuracy over `test` with the evaluation crop, in batches of
// `batch_size`; with max_examples > 0, over its first batches until at least
// that many images (a whole number of batches).
absl::StatusOr<StepResult> EvaluateTestSet(Model* model, const ImageSet& test,
                                           const NamedConstViews& weights,
                                           int64_t batch_size,
                                           int64_t max_examples = 0);

}  // namespace psgd

#endif  // PSGD_WORKER_TRAIN_EVALUATE_H_
