// What both PsClient implementations do around the transport: match the
// caller's whole-model tensors to the placement, cut them into each shard's
// row slices (no copy: a row slice is contiguous) and copy pulled slices back
// into whole tensors.
//
// Thread-safety: pure functions.
#ifndef PSGD_PS_MODEL_SLICES_H_
#define PSGD_PS_MODEL_SLICES_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ps/placement.h"
#include "ps/ps_client.h"
#include "ps/types.h"

namespace psgd {
namespace ps {

// OK when `version` has one step per shard; INVALID_ARGUMENT otherwise.
absl::Status CheckVersion(const ModelVersion& version, int num_shards);

// Orders whole-model tensors as placement.variables: (*data)[v] is the data
// of variable v. INVALID_ARGUMENT naming the tensor when one is unknown,
// repeated, missing or of another shape.
absl::Status OrderModel(const Placement& placement,
                        absl::Span<const NamedConstTensorView> tensors,
                        std::vector<const float*>* data);
absl::Status OrderModel(const Placement& placement,
                        absl::Span<const NamedTensorView> tensors,
                        std::vector<float*>* data);

// Shard `shard`'s slices of an ordered model, borrowing its memory.
std::vector<TensorBytes> ShardSlices(const Placement& placement, int shard,
                                     absl::Span<const float* const> model);

// Copies what shard `shard` returned into the ordered model.
// INVALID_ARGUMENT naming the shard and the slice for a slice the shard does
// not hold, one repeated or missing, a dtype other than float32, another
// shape or byte count.
absl::Status AssembleShard(const Placement& placement, int shard,
                           absl::Span<const TensorBytes> pulled,
                           absl::Span<float* const> model);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_MODEL_SLICES_H_
