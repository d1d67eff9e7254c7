// Local response normalisation through oneDNN's LRN primitive: the
// alternative to lrn.h's kernel that docs/PERFORMANCE.md measures
// (`cpu:lrn=onednn`). oneDNN divides alpha by the window size, so the plan
// passes alpha * (2 * depth_radius + 1) for TensorFlow's definition.
//
// oneDNN's backward reads a workspace that its forward writes. The op keeps
// the workspace of its last Forward and the address of the input it was made
// from; a Backward on another address runs the forward again first. (A caller
// that rewrites x in place between Forward and Backward must call Forward
// again; the model never does.) This is a measured alternative, not the
// default.
//
// Thread-safety: as LrnOp (one thread at a time).
#ifndef PSGD_WORKER_CPU_LRN_ONEDNN_H_
#define PSGD_WORKER_CPU_LRN_ONEDNN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/cpu/onednn_util.h"

namespace psgd {

// INVALID_ARGUMENT for an invalid shape; INTERNAL if oneDNN has no kernel.
// `context` is not owned and must outlive the op.
absl::StatusOr<std::unique_ptr<LrnOp>> CreateOneDnnLrn(const LrnShape& shape,
                                                       OneDnnContext* context);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_LRN_ONEDNN_H_
