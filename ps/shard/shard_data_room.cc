#include "ps/shard/shard_data_room.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {

ShardDataRoom::ShardDataRoom(const ShardOptions& options, std::string name)
    : options_(options), name_(std::move(name)) {}

absl::Status ShardDataRoom::OpenQueue() {
  ASSIGN_OR_RETURN(DataQueue queue, DataQueue::Create(options_.data_queue));
  leases_.emplace(std::move(queue), options_.data_epochs, name_);
  return absl::OkStatus();
}

absl::Status ShardDataRoom::CheckQueue() const {
  if (leases_.has_value()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this shard hands out no data (the servers hand it out from shard "
      "0 with data { sharding: SERVERS } in the config)");
}

absl::StatusOr<DataChunk> ShardDataRoom::Lease(
    int worker_id, const DataChunkRef* give_back, int64_t step,
    absl::FunctionRef<std::set<int>()> pulling) {
  return leases_->Lease(worker_id, give_back, step, pulling);
}

std::optional<DataQueuePosition> ShardDataRoom::Position() const {
  if (!leases_.has_value()) return std::nullopt;
  return leases_->queue().Position();
}

void ShardDataRoom::Applied(int64_t step,
                            const std::vector<DecidedChunk>& chunks) {
  if (leases_.has_value()) {
    for (std::string& line : leases_->Applied(step, ledger_ != nullptr)) {
      ledger_->Add(std::move(line));
    }
    return;
  }
  if (ledger_ == nullptr) return;
  for (const DecidedChunk& c : chunks) {
    ledger_->Add(FormatLedgerLine(c.worker, step, c.ledger_generation,
                                  c.chunk.epoch, c.chunk.index, c.samples));
  }
}

void ShardDataRoom::Gone(int worker_id) {
  if (leases_.has_value()) leases_->Gone(worker_id);
}

absl::StatusOr<std::optional<DataQueue>> ShardDataRoom::QueueOf(
    const ShardCheckpoint& c) const {
  if (!leases_.has_value()) return std::optional<DataQueue>();
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
                                      leases_->queue().generation() + 1));
  return std::optional<DataQueue>(std::move(restored));
}

void ShardDataRoom::Install(std::optional<DataQueue> queue,
                            const ShardCheckpoint& c) {
  if (queue.has_value()) leases_->Install(*std::move(queue));
  // The lines written since the checkpoint describe gradients its weights
  // do not have.
  if (ledger_ != nullptr)
    ledger_->Truncate(std::max<int64_t>(c.ledger_bytes, 0));
}

void ShardDataRoom::Save(ShardCheckpoint* c) {
  if (leases_.has_value()) c->data_queue = leases_->queue().Snapshot();
  // On disk before the checkpoint names it (a rare write under the lock).
  if (ledger_ != nullptr) c->ledger_bytes = ledger_->Flush();
}

void ShardDataRoom::AddStatus(ShardStatus* s) const {
  if (!leases_.has_value()) return;
  const DataQueuePosition p = leases_->queue().Position();
  s->data_queue = true;
  s->data_epoch = p.epoch;
  s->data_chunks_done = p.chunks_done;
  s->data_chunks_per_epoch = p.chunks_in_epoch;
  s->data_chunks_out = p.chunks_out;
  s->data_chunks_queued = p.chunks_queued;
  s->data_counters = leases_->queue().counters();
}

}  // namespace ps
}  // namespace psgd
