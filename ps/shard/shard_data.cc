// ParameterShard's data queue (docs/PS.md, "The servers hand out the
// data"): leases, the chunks settled by the pushes they were computed for,
// the ledger, and the queue in checkpoints.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {

absl::Status ParameterShard::OpenDataQueue() {
  ASSIGN_OR_RETURN(DataQueue queue, DataQueue::Create(options_.data_queue));
  MutexLock lock(&mu_);
  data_.emplace(std::move(queue), options_.data_epochs, name_);
  return absl::OkStatus();
}

void ParameterShard::LedgerChunksLocked(
    const std::vector<DecidedChunk>& chunks) {
  if (ledger_ == nullptr) return;
  for (const DecidedChunk& c : chunks) {
    ledger_->Add(FormatLedgerLine(c.worker, step_, c.ledger_generation,
                                  c.chunk.epoch, c.chunk.index, c.samples));
  }
}

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
  if (!data_.has_value()) {
    return absl::FailedPreconditionError(
        "this shard hands out no data (the servers hand it out from shard "
        "0 with data { sharding: SERVERS } in the config)");
  }
  RETURN_IF_ERROR(membership_.CheckWorkerId(worker_id));
  if (!membership_.IsLive(worker_id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker_id, " is not a live member (join first)"));
  }
  // A lease is a sign of life, answered or not: a worker that waits for the
  // last epoch's chunks keeps its own lease while it asks.
  membership_.Touch(worker_id, absl::Now());
  return data_->Lease(worker_id, give_back, step_, [this]() {
    mu_.AssertHeld();
    std::set<int> pulling;
    for (const auto& [unused, w] : waiters_) {
      if (w.worker_id >= 0) pulling.insert(w.worker_id);
    }
    return pulling;
  });
}

std::optional<DataQueuePosition> ParameterShard::DataPosition() const {
  MutexLock lock(&mu_);
  if (!data_.has_value()) return std::nullopt;
  return data_->queue().Position();
}

void ParameterShard::ChunksAppliedLocked() {
  if (!data_.has_value()) return;
  for (std::string& line : data_->Applied(step_, ledger_ != nullptr)) {
    ledger_->Add(std::move(line));
  }
}

void ParameterShard::ChunksGoneLocked(int worker_id) {
  if (data_.has_value()) data_->Gone(worker_id);
}

absl::StatusOr<std::optional<DataQueue>> ParameterShard::DataQueueOfLocked(
    const ShardCheckpoint& c) const {
  if (!data_.has_value()) return std::optional<DataQueue>();
  if (!c.data_queue.has_value()) {
    // A checkpoint of a run whose servers did not hand out the data: the
    // queue starts at epoch 0.
    spdlog::warn(
        "{}: checkpoint step-{} has no data queue: the data starts at "
        "epoch 0",
        name_, c.label);
    ASSIGN_OR_RETURN(DataQueue fresh, DataQueue::Create(options_.data_queue));
    return std::optional<DataQueue>(std::move(fresh));
  }
  // A new generation past this object's: every lease made so far is void.
  ASSIGN_OR_RETURN(DataQueue restored,
                   DataQueue::Restore(options_.data_queue, *c.data_queue,
                                      data_->queue().generation() + 1));
  return std::optional<DataQueue>(std::move(restored));
}

void ParameterShard::InstallDataLocked(std::optional<DataQueue> queue,
                                       const ShardCheckpoint& c) {
  if (queue.has_value()) data_->Install(*std::move(queue));
  // The lines written since the checkpoint describe gradients its weights
  // do not have.
  if (ledger_ != nullptr)
    ledger_->Truncate(std::max<int64_t>(c.ledger_bytes, 0));
}

void ParameterShard::SaveDataLocked(ShardCheckpoint* c) {
  if (data_.has_value()) c->data_queue = data_->queue().Snapshot();
  // On disk before the checkpoint names it (a rare write under the lock).
  if (ledger_ != nullptr) c->ledger_bytes = ledger_->Flush();
}

}  // namespace ps
}  // namespace psgd
