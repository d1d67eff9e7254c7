// One training step of a cluster worker with overlap (wire { overlap: true };
// docs/CLUSTER.md, "Overlap"): the forward awaits each variable's group pull
// before its first use, and each gradient goes to the servers as a part as
// soon as the backward has produced it, the batch statistics (when they
// live on the servers) last.
//
// Thread-safety: none; called from the worker loop's thread.
#ifndef PSGD_WORKER_CLUSTER_OVERLAPPED_STEP_H_
#define PSGD_WORKER_CLUSTER_OVERLAPPED_STEP_H_

#include <functional>

#include "absl/status/statusor.h"
#include "worker/cluster/worker_statistics.h"
#include "worker/data/batcher.h"
#include "worker/models/model.h"
#include "worker/session/worker_session.h"

namespace psgd {

// What the step works on; nothing is owned.
struct OverlapStep {
  Model* model = nullptr;
  WorkerSession* session = nullptr;
  WorkerStatistics* statistics = nullptr;
  const NamedTensors* weights = nullptr;  // the session's pull buffers
  NamedTensors* gradients = nullptr;
  // Whether the session's pulled version is a step to stop at.
  std::function<bool()> stop_due;
  int worker_id = 0;
};

// Forward on weights still arriving, gradients sent as parts; the caller
// finishes the push (WorkerSession::FinishParts). False, with nothing sent,
// when a group's pull failed or the shards moved between the groups (the
// weights are then pulled whole again), or when the pulled step is one to
// stop at (the forward ends as soon as that is known).
absl::StatusOr<bool> ComputeOverlapped(const OverlapStep& step,
                                       const Batch& batch, StepResult* result);

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_OVERLAPPED_STEP_H_
