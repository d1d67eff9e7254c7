// Times each op of the cifar10 tutorial model on its own, at the model's
// shapes, through the Backend interface: where a training step's time goes.
//
// Thread-safety: uses the backend from the calling thread only.
#ifndef PSGD_WORKER_BENCH_OP_PROFILE_H_
#define PSGD_WORKER_BENCH_OP_PROFILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"

namespace psgd {

struct OpTime {
  std::string name;  // e.g. "conv2 backward data"
  double ms = 0.0;   // mean over the repetitions
};

// Each op of one training step at batch `batch`, `reps` times after a
// warm-up run.
absl::StatusOr<std::vector<OpTime>> ProfileTutorialOps(Backend* backend,
                                                       int64_t batch, int reps);

}  // namespace psgd

#endif  // PSGD_WORKER_BENCH_OP_PROFILE_H_
