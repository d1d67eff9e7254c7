// ParameterShard's requests of the data queue (docs/PS.md, "The servers
// hand out the data"): who may lease is checked here; the queue, its
// leases and the ledger's lines are the data room's (shard_data_room.h).
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

absl::StatusOr<DataChunk> ParameterShard::LeaseData(
    int worker_id, int64_t generation, const DataChunkRef* give_back) {
  absl::StatusOr<DataChunk> chunk;
  {
    MutexLock lock(&mu_);
    chunk = LeaseDataLocked(worker_id, generation, give_back);
  }
  if (!chunk.ok()) {
    return Annotate(chunk.status(),
                    absl::StrCat(name_, ": data for worker ", worker_id, ": "));
  }
  return chunk;
}

absl::StatusOr<DataChunk> ParameterShard::LeaseDataLocked(
    int worker_id, int64_t generation, const DataChunkRef* give_back) {
  RETURN_IF_ERROR(CheckOpenLocked());
  RETURN_IF_ERROR(CheckGenerationLocked(generation));
  RETURN_IF_ERROR(data_.CheckQueue());
  RETURN_IF_ERROR(membership_.CheckWorkerId(worker_id));
  if (!membership_.IsLive(worker_id)) {
    return LeaseRefused(
        LeaseRefusal::kNotLive,
        absl::FailedPreconditionError(absl::StrCat(
            "worker ", worker_id, " is not a live member (join first)")));
  }
  // A lease is a sign of life, answered or not: a worker that waits for the
  // last epoch's chunks keeps its own lease while it asks.
  membership_.Touch(worker_id, absl::Now());
  return data_.Lease(worker_id, give_back, model_.step(), [this]() {
    mu_.AssertHeld();
    return pulls_.Workers();
  });
}

std::optional<DataQueuePosition> ParameterShard::DataPosition() const {
  MutexLock lock(&mu_);
  return data_.Position();
}

}  // namespace ps
}  // namespace psgd
