// What both PsClient implementations do around the transport: match the
// caller's whole-model tensors to the placement, cut them into each shard's
// row slices (no copy: a row slice is contiguous) and copy pulled slices back
// into whole tensors.
//
// Thread-safety: pure functions.
#ifndef PSGD_PS_CLIENT_MODEL_SLICES_H_
#define PSGD_PS_CLIENT_MODEL_SLICES_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/client/ps_client.h"
#include "ps/state/placement.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// OK when `version` has one step per shard; INVALID_ARGUMENT otherwise.
absl::Status CheckVersion(const ModelVersion& version, int num_shards);

// Records shard `shard`'s generation in a pulled version (shards in
// order, 0 first): ABORTED when it differs from the earlier shards' (the
// cluster is rolling back; pull again).
absl::Status AgreeOnGeneration(int shard, int64_t generation,
                               ModelVersion* version);

// Orders whole-model tensors as placement.variables: (*data)[v] is the data
// of variable v. INVALID_ARGUMENT naming the tensor when one is unknown,
// repeated, missing or of another shape.
absl::Status OrderModel(const Placement& placement,
                        absl::Span<const NamedConstTensorView> tensors,
                        std::vector<const float*>* data);
absl::Status OrderModel(const Placement& placement,
                        absl::Span<const NamedTensorView> tensors,
                        std::vector<float*>* data);

// OrderModel for a part of the model (PsClient::PullPart, PushPart): some
// variables, each once; the others' data are null. INVALID_ARGUMENT naming
// the tensor as OrderModel's, and for no tensor at all.
absl::Status OrderPart(const Placement& placement,
                       absl::Span<const NamedConstTensorView> tensors,
                       std::vector<const float*>* data);
absl::Status OrderPart(const Placement& placement,
                       absl::Span<const NamedTensorView> tensors,
                       std::vector<float*>* data);

// Shard `shard`'s slices of an ordered model (or part: variables whose data
// is null are left out), borrowing its memory.
std::vector<TensorBytes> ShardSlices(const Placement& placement, int shard,
                                     absl::Span<const float* const> model);

// ShardSlices of a whole model as an Initialize sends them: each with its
// variable's kind and, for a slice of a split variable, its SliceOf.
std::vector<TensorBytes> ShardInitialValues(
    const Placement& placement, int shard,
    absl::Span<const float* const> model);

// Puts one shard's pulled slices into the ordered model as they are
// decoded: Destination checks a slice against the placement and says where
// its bytes go; Done, called once the slice's bytes are there, converts a
// bfloat16 or float16 slice into the model; Finish checks that every slice
// of the shard came (of a part: every slice of the part's variables, and
// no other).
// Errors: INVALID_ARGUMENT naming the shard and the slice for a slice the
// shard does not hold, one repeated or missing, a dtype other than the
// wire dtype (float32 by default), another shape or byte count, a float16
// slice without a finite scale > 0.
class ShardAssembler {
 public:
  // The placement and the model's memory are borrowed; so is `scratch`,
  // where 16-bit slices wait for Done (a caller that pulls again and again
  // passes the same one, so that its memory is reused; null: the
  // assembler's own).
  ShardAssembler(const Placement& placement, int shard,
                 absl::Span<float* const> model,
                 DType wire_dtype = DType::kFloat32,
                 std::vector<uint16_t>* scratch = nullptr)
      : placement_(placement),
        shard_(shard),
        model_(model),
        wire_dtype_(wire_dtype),
        seen_(placement.slices.size(), false),
        scratch_(scratch != nullptr ? scratch : &own_scratch_) {}

  // `tensor`'s data is not used: only its name, shape and dtype.
  absl::StatusOr<char*> Destination(const TensorBytes& tensor, size_t bytes);
  // `tensor` with every field and its data where Destination said.
  absl::Status Done(const TensorBytes& tensor);
  // Destination, a copy of `tensor`'s data there, and Done: for a tensor
  // whose bytes are all at hand.
  absl::Status Add(const TensorBytes& tensor);
  absl::Status Finish() const;

 private:
  const Placement& placement_;
  const int shard_;
  const absl::Span<float* const> model_;
  const DType wire_dtype_;
  std::vector<bool> seen_;
  // A 16-bit slice's bytes, until Done converts them to model_.
  std::vector<uint16_t> own_scratch_;
  std::vector<uint16_t>* const scratch_;
  float* pending_ = nullptr;
};

// Copies what shard `shard` returned into the ordered model, with the
// checks of ShardAssembler.
absl::Status AssembleShard(const Placement& placement, int shard,
                           absl::Span<const TensorBytes> pulled,
                           absl::Span<float* const> model);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_MODEL_SLICES_H_
