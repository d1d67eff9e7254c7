// The checks of a pushed gradient that read its bytes, or need no more of
// the shard than its layout (docs/PS.md, "Bad input"): made before the
// shard's mutex is taken, by ParameterShard and, for a push out of shared
// memory or in a 16-bit wire dtype, by the transport before it decodes or
// copies. What they refuse changes nothing.
#ifndef PSGD_PS_SHARD_PUSH_CHECKS_H_
#define PSGD_PS_SHARD_PUSH_CHECKS_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/thread_pool.h"
#include "ps/state/options.h"
#include "ps/state/push_stage.h"
#include "ps/state/types.h"
#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

// The layout of the shard's variables now; null before it has any.
using LayoutSource = absl::FunctionRef<std::shared_ptr<const VariableLayout>()>;

// The checks of a push's tensors that read their values, in one pass over
// all of them split over `pool`'s threads (CheckFloatTensors): each as a
// gradient, or, for a running statistic, as a batch statistic (`layout` is
// read only to name a refused tensor's kind, not on every push). A tensor
// marked without a gradient must carry no bytes. With copy_to[k], tensor
// k's data is copied there by the check's pass (a push out of shared
// memory, then marked TensorBytes::checked; a part staged as a copy). Each
// tensor's status, in order.
std::vector<absl::Status> CheckPushedTensors(
    absl::Span<const TensorBytes> tensors, absl::Span<float* const> copy_to,
    ThreadPool* pool, LayoutSource layout);

// Before a push's bytes are decoded (16-bit wire dtypes become float32):
// INVALID_ARGUMENT naming the first tensor that names one of `layout`'s
// variables with another shape, so that no decode is sized by a shape the
// shard does not hold. Unknown names, and every tensor when `layout` is
// null (before Initialize), are left to the push's own checks.
absl::Status CheckKnownShapes(absl::Span<const TensorBytes> tensors,
                              const VariableLayout* layout);

// Batch norm's running statistics (docs/CLUSTER.md, "Batch norm"): where
// the cluster keeps them on the workers (`where` kLocal), INVALID_ARGUMENT
// naming the first of `tensors` (an Initialize's, a restore's) whose kind
// says it is one; `what` names the request ("initialize", "restore").
absl::Status CheckNoLocalStatistics(BatchNormStatistics where,
                                    absl::Span<const TensorBytes> tensors,
                                    absl::string_view what);

// Where a push's gradients are staged: where they lie, with `keep` holding
// the request's memory (no copy), or, without it (null), in buffers of
// their own, allocated here uninitialised for the check's pass to fill
// (*copy_to, one entry a gradient, null for none and for a borrowed one).
std::vector<StagedGradient> StagingFor(absl::Span<const TensorBytes> gradients,
                                       const std::shared_ptr<const void>& keep,
                                       std::vector<float*>* copy_to);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_PUSH_CHECKS_H_
