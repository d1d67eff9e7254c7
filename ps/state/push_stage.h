// The pushes a shard holds before it decides them (docs/PS.md, "Pushes in
// parts"): each worker's parts of one push until every variable of the
// shard has its gradient, and, in a cluster of several shards, the complete
// pushes that wait for shard 0's decision.
//
// Parts. A worker has at most one push in parts. A part of the same push
// (the same generation, step and push id) adds to what is staged; a part of
// a newer push starts it afresh. Once every variable has its gradient (or
// is marked as having none) the push is complete: AddPart hands it back and
// the worker's stage is empty again.
//
// Complete pushes (several shards). Every shard stages the push; shard 0
// decides it (its commit), the others apply or drop it when the decision
// reaches them. A worker commits its pushes one after another, so a push
// that is decided takes along the pushes of its worker completed before it
// (never committed). Each is kept under (worker, push id), with its
// arrival: the order the pushes were completed in.
//
// Thread-safety: none; the shard calls it under its own mutex.
#ifndef PSGD_PS_STATE_PUSH_STAGE_H_
#define PSGD_PS_STATE_PUSH_STAGE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// A staged gradient's floats: a copy the stage owns, or memory of the
// request that brought it (a push over gRPC keeps its parsed message for
// the stage instead of a copy), held by `keep` until the stage drops it.
struct StagedGradient {
  AlignedBuffer copy;
  const float* borrowed = nullptr;
  std::shared_ptr<const void> keep;
  int64_t bytes = 0;

  const float* data() const {
    return borrowed != nullptr ? borrowed : copy.data();
  }
};

// One push's gradients, in the shard's layout order.
struct StagedPush {
  int64_t step = 0;
  int64_t generation = 0;
  uint64_t push_id = 0;
  uint64_t arrival = 0;  // complete pushes: the order they were completed in
  // has[i]: grads[i] has come.
  std::vector<StagedGradient> grads;
  std::vector<bool> has;
  std::vector<bool> no_gradient;  // marked so in its part
  int received = 0;

  // The gradients, null for a variable marked as having none.
  std::vector<const float*> Gradients() const;
};

class PushStage {
 public:
  // Which of the shard's variables a gradient is for (its layout index), or
  // the refusal of a gradient that matches none.
  using Match = absl::FunctionRef<absl::StatusOr<int>(const TensorBytes&)>;

  // A part of `worker_id`'s push: gradients[j], whose float data is
  // (*floats)[j] (moved from), for a shard of `num_variables` variables.
  // Returns the complete push when the part completes it, else nullopt.
  // Refusals change nothing: FAILED_PRECONDITION for a part of an older
  // step than the push staged in the same generation; `match`'s refusal;
  // INVALID_ARGUMENT for a second gradient of one variable (in the part, or
  // staged before).
  absl::StatusOr<std::optional<StagedPush>> AddPart(
      int worker_id, int64_t step, int64_t generation, uint64_t push_id,
      int num_variables, absl::Span<const TensorBytes> gradients, Match match,
      std::vector<StagedGradient>* floats);
  // The gradients staged for the worker's push in parts (0: none).
  int PartsReceived(int worker_id) const;
  // Drops the worker's parts; whether it had any.
  bool DropParts(int worker_id);
  void ClearParts();
  // The bytes the staged parts hold (ShardStatus::memory), copies and
  // requests' memory alike.
  int64_t PartBytes() const;

  // Keeps `push` (complete) for a decision; it is the worker's newest.
  void KeepComplete(int worker_id, StagedPush push);
  // The worker's complete pushes kept.
  int CompleteOf(int worker_id) const;
  // Null when the push is not kept.
  const StagedPush* FindComplete(int worker_id, uint64_t push_id) const;
  // The push, removed with the worker's pushes completed before it; nullopt
  // (nothing changes) when it is not kept.
  std::optional<StagedPush> TakeComplete(int worker_id, uint64_t push_id);
  // Drops that push alone, if kept (a refused push: the worker's earlier
  // ones may still wait in the step's aggregate).
  void DropOneComplete(int worker_id, uint64_t push_id);
  // Drops the worker's pushes completed up to `arrival`, included.
  void DropCompleteThrough(int worker_id, uint64_t arrival);
  // Drops every complete push of the worker.
  void DropComplete(int worker_id);
  void ClearComplete();

 private:
  absl::flat_hash_map<int, StagedPush> parts_;
  std::map<std::pair<int, uint64_t>, StagedPush> complete_;
  uint64_t next_arrival_ = 1;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_PUSH_STAGE_H_
