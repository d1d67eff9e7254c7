// ParameterShard's data queue (docs/PS.md, "The servers hand out the
// data"): leases, the chunks settled by the pushes they were computed for,
// the ledger, and the queue in checkpoints.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
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
namespace {

// The chunks a lease waits for, "E/I (worker W)", the first 8 of them.
std::string ChunksOutText(const std::vector<LeasedChunk>& chunks) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < chunks.size() && i < kShown; ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ", ", chunks[i].epoch, "/",
                    chunks[i].index, " (worker ", chunks[i].worker, ")");
  }
  if (chunks.size() > kShown) {
    absl::StrAppend(&text, " and ", chunks.size() - kShown, " more");
  }
  return text;
}

}  // namespace

absl::Status ParameterShard::OpenDataQueue() {
  ASSIGN_OR_RETURN(DataQueue queue, DataQueue::Create(options_.data_queue));
  MutexLock lock(&mu_);
  data_.emplace(std::move(queue));
  return OpenLedgerLocked();
}

absl::Status ParameterShard::OpenLedgerLocked() {
  if (options_.ledger_file.empty() || ledger_ != nullptr) {
    return absl::OkStatus();
  }
  const std::filesystem::path dir =
      std::filesystem::path(options_.ledger_file).parent_path();
  std::error_code error;
  if (!dir.empty()) std::filesystem::create_directories(dir, error);
  ledger_ = std::fopen(options_.ledger_file.c_str(), "a");
  if (ledger_ == nullptr) {
    return absl::InternalError(absl::StrCat(name_, ": cannot open the ledger ",
                                            options_.ledger_file, ": ",
                                            std::strerror(errno)));
  }
  return absl::OkStatus();
}

void ParameterShard::WriteLedgerLocked(const std::string& line) {
  if (std::fputs(line.c_str(), ledger_) < 0 || std::fflush(ledger_) != 0) {
    spdlog::error("{}: writing the ledger {}: {}", name_, options_.ledger_file,
                  std::strerror(errno));
  }
}

void ParameterShard::LedgerChunksLocked(
    const std::vector<DecidedChunk>& chunks) {
  if (ledger_ == nullptr) return;
  for (const DecidedChunk& c : chunks) {
    WriteLedgerLocked(FormatLedgerLine(c.worker, step_, c.ledger_generation,
                                       c.chunk.epoch, c.chunk.index,
                                       c.samples) +
                      "\n");
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
  // last epoch's chunks (below) keeps its own lease while it asks.
  membership_.Touch(worker_id, absl::Now());
  std::deque<DataChunkRef>& out = data_out_[worker_id];
  if (give_back != nullptr) {
    for (const auto& [w, kept] : data_kept_) {
      if (w == worker_id && kept == *give_back) {
        return LeaseRefused(
            LeaseRefusal::kNotYours,
            absl::FailedPreconditionError(
                absl::StrCat("chunk ", give_back->epoch, "/", give_back->index,
                             ": its gradient is in step ", step_,
                             "'s aggregate; it cannot be given back")));
      }
    }
    RETURN_IF_ERROR(
        LeaseRefused(LeaseRefusal::kNotYours,
                     data_->Return(worker_id, give_back->epoch,
                                   give_back->index, give_back->lease)));
    for (auto it = out.begin(); it != out.end(); ++it) {
      if (*it == *give_back) {
        out.erase(it);
        break;
      }
    }
  }
  if (out.size() >= kMaxLeasesPerWorker) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker_id, " holds ", out.size(),
                     " chunks it has neither pushed nor given back (at most ",
                     kMaxLeasesPerWorker, ")"));
  }
  if (options_.data_epochs > 0 &&
      data_->NextLeaseEpoch() >= options_.data_epochs) {
    // Nothing is left to hand out. The data has ended only when no chunk
    // of the run's epochs can come back for another worker to train.
    if (!out.empty()) {
      // The worker's own chunks come first: it pushes them, then asks
      // again (and then waits as below if others' chunks are out).
      return absl::OutOfRangeError(absl::StrCat(
          "the data ended: its ", options_.data_epochs,
          " epoch(s) are handed out, and worker ", worker_id, " holds ",
          out.size(), " chunk(s) of them not pushed yet"));
    }
    std::set<int> pulling;
    for (const auto& [unused, w] : waiters_) {
      if (w.worker_id >= 0) pulling.insert(w.worker_id);
    }
    std::vector<LeasedChunk> awaited;
    for (const LeasedChunk& c : data_->LeasedBefore(options_.data_epochs)) {
      // In the pending sync step's aggregate: done when the step is
      // applied, which this worker's leave may complete.
      const DataChunkRef ref{c.epoch, c.index, c.lease};
      bool kept = false;
      for (const auto& [w, k] : data_kept_) kept = kept || k == ref;
      // With a worker that waits for a step (its push is made): it trains
      // its other chunks once the step completes, which may need this
      // worker's push or leave.
      if (kept || pulling.count(c.worker) > 0) continue;
      awaited.push_back(c);
    }
    if (awaited.empty()) {
      return absl::OutOfRangeError(absl::StrCat("the data ended: its ",
                                                options_.data_epochs,
                                                " epoch(s) are handed out"));
    }
    // UNAVAILABLE: the worker leases again after a pause (WorkerSession::
    // LeaseData). A chunk whose worker leaves or loses its lease comes
    // back to the queue, and this worker trains it.
    return LeaseRefused(
        LeaseRefusal::kNotEnded,
        absl::UnavailableError(absl::StrCat(
            kDataNotEnded, ": nothing is left to hand out, but ",
            awaited.size(), " chunk(s) of its ", options_.data_epochs,
            " epoch(s) are out with workers computing them: ",
            ChunksOutText(awaited),
            "; lease again (a chunk whose worker leaves or loses its lease "
            "comes back to the queue)")));
  }
  ASSIGN_OR_RETURN(DataChunk c, data_->Lease(worker_id));
  out.push_back({c.epoch, c.index, c.lease});
  return c;
}

std::optional<DataQueuePosition> ParameterShard::DataPosition() const {
  MutexLock lock(&mu_);
  if (!data_.has_value()) return std::nullopt;
  return data_->Position();
}

bool ParameterShard::HoldsChunkLocked(int worker_id,
                                      const DataChunkRef* chunk) const {
  if (chunk == nullptr || !data_.has_value()) return true;
  auto it = data_out_.find(worker_id);
  if (it == data_out_.end()) return false;
  for (const DataChunkRef& c : it->second) {
    if (c == *chunk) return true;
  }
  return false;
}

void ParameterShard::SettleChunkLocked(int worker_id, const DataChunkRef* chunk,
                                       bool kept) {
  // No chunk: the worker reads data of its own.
  if (chunk == nullptr || !data_.has_value()) return;
  auto it = data_out_.find(worker_id);
  if (it == data_out_.end()) return;
  for (auto c = it->second.begin(); c != it->second.end(); ++c) {
    if (!(*c == *chunk)) continue;
    it->second.erase(c);
    if (kept) {
      data_kept_.push_back({worker_id, *chunk});
      return;
    }
    // The worker holds the lease: Return cannot be refused.
    absl::Status s = data_->Return(worker_id, chunk->epoch, chunk->index,
                                   chunk->lease, /*dropped=*/true);
    if (!s.ok()) spdlog::warn("{}: {}", name_, s.ToString());
    return;
  }
}

void ParameterShard::ChunksAppliedLocked() {
  if (!data_.has_value()) return;
  for (const auto& [worker, chunk] : data_kept_) {
    // The samples before Done, which may close the chunk's epoch.
    const std::vector<int64_t> samples =
        ledger_ != nullptr ? data_->ChunkSamples(chunk.epoch, chunk.index)
                           : std::vector<int64_t>();
    absl::Status s = data_->Done(worker, chunk.epoch, chunk.index, chunk.lease);
    if (!s.ok()) {
      spdlog::warn("{}: {}", name_, s.ToString());
      continue;
    }
    if (ledger_ != nullptr) {
      WriteLedgerLocked(FormatLedgerLine(worker, step_, data_->generation(),
                                         chunk.epoch, chunk.index, samples) +
                        "\n");
    }
  }
  data_kept_.clear();
}

void ParameterShard::ChunksGoneLocked(int worker_id) {
  if (!data_.has_value()) return;
  auto it = data_out_.find(worker_id);
  if (it == data_out_.end()) return;
  // Only the chunks no push has settled: those in the pending aggregate are
  // done when it is applied.
  for (const DataChunkRef& c : it->second) {
    absl::Status s = data_->Return(worker_id, c.epoch, c.index, c.lease);
    if (!s.ok()) spdlog::warn("{}: {}", name_, s.ToString());
  }
  data_out_.erase(it);
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
                                      data_->generation() + 1));
  return std::optional<DataQueue>(std::move(restored));
}

void ParameterShard::InstallDataLocked(std::optional<DataQueue> queue,
                                       const ShardCheckpoint& c) {
  if (queue.has_value()) {
    data_ = std::move(queue);
    data_out_.clear();
    data_kept_.clear();
  }
  if (ledger_ == nullptr) return;
  // The lines written since the checkpoint describe gradients its weights
  // do not have.
  const int64_t length = c.ledger_bytes >= 0 ? c.ledger_bytes : 0;
  std::fflush(ledger_);
  if (::ftruncate(fileno(ledger_), length) != 0) {
    spdlog::error("{}: cutting the ledger {} back to {} bytes: {}", name_,
                  options_.ledger_file, length, std::strerror(errno));
  }
}

void ParameterShard::SaveDataLocked(ShardCheckpoint* c) {
  if (data_.has_value()) c->data_queue = data_->Snapshot();
  if (ledger_ == nullptr) return;
  std::fflush(ledger_);
  struct stat st;
  if (::fstat(fileno(ledger_), &st) == 0) c->ledger_bytes = st.st_size;
}

}  // namespace ps
}  // namespace psgd
