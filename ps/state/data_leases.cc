#include "ps/state/data_leases.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/state/types.h"
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

DataLeases::DataLeases(DataQueue queue, int64_t epochs, std::string owner)
    : queue_(std::move(queue)), epochs_(epochs), owner_(std::move(owner)) {}

absl::StatusOr<DataChunk> DataLeases::Lease(
    int worker_id, const DataChunkRef* give_back, int64_t step,
    absl::FunctionRef<std::set<int>()> pulling) {
  std::deque<DataChunkRef>& out = out_[worker_id];
  if (give_back != nullptr) {
    for (const auto& [w, kept] : kept_) {
      if (w == worker_id && kept == *give_back) {
        return LeaseRefused(
            LeaseRefusal::kNotYours,
            absl::FailedPreconditionError(
                absl::StrCat("chunk ", give_back->epoch, "/", give_back->index,
                             ": its gradient is in step ", step,
                             "'s aggregate; it cannot be given back")));
      }
    }
    RETURN_IF_ERROR(
        LeaseRefused(LeaseRefusal::kNotYours,
                     queue_.Return(worker_id, give_back->epoch,
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
  if (epochs_ > 0 && queue_.NextLeaseEpoch() >= epochs_) {
    // Nothing is left to hand out. The data has ended only when no chunk
    // of the run's epochs can come back for another worker to train.
    if (!out.empty()) {
      // The worker's own chunks come first: it pushes them, then asks
      // again (and then waits as below if others' chunks are out).
      return absl::OutOfRangeError(absl::StrCat(
          "the data ended: its ", epochs_,
          " epoch(s) are handed out, and worker ", worker_id, " holds ",
          out.size(), " chunk(s) of them not pushed yet"));
    }
    const std::set<int> waiting = pulling();
    std::vector<LeasedChunk> awaited;
    for (const LeasedChunk& c : queue_.LeasedBefore(epochs_)) {
      // In the pending sync step's aggregate: done when the step is
      // applied, which this worker's leave may complete.
      const DataChunkRef ref{c.epoch, c.index, c.lease};
      bool kept = false;
      for (const auto& [w, k] : kept_) kept = kept || k == ref;
      // With a worker that waits for a step (its push is made): it trains
      // its other chunks once the step completes, which may need this
      // worker's push or leave.
      if (kept || waiting.count(c.worker) > 0) continue;
      awaited.push_back(c);
    }
    if (awaited.empty()) {
      return absl::OutOfRangeError(absl::StrCat("the data ended: its ", epochs_,
                                                " epoch(s) are handed out"));
    }
    // UNAVAILABLE: the worker leases again after a pause (WorkerSession::
    // LeaseData). A chunk whose worker leaves or loses its lease comes
    // back to the queue, and this worker trains it.
    return LeaseRefused(
        LeaseRefusal::kNotEnded,
        absl::UnavailableError(absl::StrCat(
            kDataNotEnded, ": nothing is left to hand out, but ",
            awaited.size(), " chunk(s) of its ", epochs_,
            " epoch(s) are out with workers computing them: ",
            ChunksOutText(awaited),
            "; lease again (a chunk whose worker leaves or loses its lease "
            "comes back to the queue)")));
  }
  ASSIGN_OR_RETURN(DataChunk c, queue_.Lease(worker_id));
  out.push_back({c.epoch, c.index, c.lease});
  return c;
}

bool DataLeases::Holds(int worker_id, const DataChunkRef* chunk) const {
  if (chunk == nullptr) return true;
  auto it = out_.find(worker_id);
  if (it == out_.end()) return false;
  for (const DataChunkRef& c : it->second) {
    if (c == *chunk) return true;
  }
  return false;
}

void DataLeases::Settle(int worker_id, const DataChunkRef* chunk, bool kept) {
  // No chunk: the worker reads data of its own.
  if (chunk == nullptr) return;
  auto it = out_.find(worker_id);
  if (it == out_.end()) return;
  for (auto c = it->second.begin(); c != it->second.end(); ++c) {
    if (!(*c == *chunk)) continue;
    it->second.erase(c);
    if (kept) {
      kept_.push_back({worker_id, *chunk});
      return;
    }
    // The worker holds the lease: Return cannot be refused.
    absl::Status s = queue_.Return(worker_id, chunk->epoch, chunk->index,
                                   chunk->lease, /*dropped=*/true);
    if (!s.ok()) spdlog::warn("{}: {}", owner_, s.ToString());
    return;
  }
}

std::vector<std::string> DataLeases::Applied(int64_t step, bool ledger) {
  std::vector<std::string> lines;
  for (const auto& [worker, chunk] : kept_) {
    // The samples before Done, which may close the chunk's epoch.
    const std::vector<int64_t> samples =
        ledger ? queue_.ChunkSamples(chunk.epoch, chunk.index)
               : std::vector<int64_t>();
    absl::Status s = queue_.Done(worker, chunk.epoch, chunk.index, chunk.lease);
    if (!s.ok()) {
      spdlog::warn("{}: {}", owner_, s.ToString());
      continue;
    }
    if (ledger) {
      lines.push_back(FormatLedgerLine(worker, step, queue_.generation(),
                                       chunk.epoch, chunk.index, samples));
    }
  }
  kept_.clear();
  return lines;
}

void DataLeases::Gone(int worker_id) {
  auto it = out_.find(worker_id);
  if (it == out_.end()) return;
  // Only the chunks no push has settled: those in the pending aggregate are
  // done when it is applied.
  for (const DataChunkRef& c : it->second) {
    absl::Status s = queue_.Return(worker_id, c.epoch, c.index, c.lease);
    if (!s.ok()) spdlog::warn("{}: {}", owner_, s.ToString());
  }
  out_.erase(it);
}

void DataLeases::Install(DataQueue queue) {
  queue_ = std::move(queue);
  out_.clear();
  kept_.clear();
}

}  // namespace ps
}  // namespace psgd
