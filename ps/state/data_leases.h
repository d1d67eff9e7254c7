// What a shard keeps of the data it hands out (docs/PS.md, "The servers
// hand out the data"): the data queue, each worker's chunks that no push has
// settled yet (in lease order), and the chunks whose gradients are in the
// pending sync step's aggregate (done when the step is applied).
//
// A chunk leased to a worker is settled by the push computed from it: kept
// (its gradient was applied, or joined the step's aggregate, and the chunk
// is done when the step is applied: Applied) or dropped (stale, surplus,
// refused: back to the queue). A worker that leaves gives its unsettled
// chunks back (Gone). A restore or rollback installs the checkpoint's queue,
// with nothing out.
//
// The shard checks who may lease (open, generation, a live member) before
// it asks; the rules of the data itself are here.
//
// Thread-safety: none; the shard calls it under its own mutex.
#ifndef PSGD_PS_STATE_DATA_LEASES_H_
#define PSGD_PS_STATE_DATA_LEASES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "ps/state/data_queue.h"

namespace psgd {
namespace ps {

class DataLeases {
 public:
  // The most chunks a worker may hold that it has neither pushed nor given
  // back (no worker drains the queue).
  static constexpr size_t kMaxLeasesPerWorker = 64;

  // `epochs`: the run's epochs (0: no end). `owner` names the shard in log
  // lines ("shard 0").
  DataLeases(DataQueue queue, int64_t epochs, std::string owner);

  // A chunk for `worker_id`, after it gives `give_back` (null: none) back
  // unused. `step`: the shard's step (for messages); `pulling`: the workers
  // waiting for a step now (their chunks come back with their next push),
  // asked only once nothing is left to hand out.
  // Errors as ParameterShard::LeaseData lists them (the data's own: a chunk
  // given back that is in the step's aggregate or not the worker's, too
  // many held, the data ended or not ended yet). A refusal changes nothing.
  absl::StatusOr<DataChunk> Lease(int worker_id, const DataChunkRef* give_back,
                                  int64_t step,
                                  absl::FunctionRef<std::set<int>()> pulling);
  // Whether `worker_id` holds `chunk` unsettled (true for null: no chunk).
  bool Holds(int worker_id, const DataChunkRef* chunk) const;
  // A push of `worker_id` computed from `chunk` (null: none) was decided:
  // kept (its gradient is applied or in the step's aggregate) or dropped
  // (the chunk goes back to the queue).
  void Settle(int worker_id, const DataChunkRef* chunk, bool kept);
  // The kept chunks are done (their step is applied, at `step`). Returns
  // their ledger lines (data_queue.h's FormatLedgerLine) when `ledger`.
  std::vector<std::string> Applied(int64_t step, bool ledger);
  // The worker's unsettled chunks go back to the queue (it left).
  void Gone(int worker_id);
  // `queue` replaces the queue (a restore or rollback); nothing is out.
  void Install(DataQueue queue);

  const DataQueue& queue() const { return queue_; }

 private:
  DataQueue queue_;
  const int64_t epochs_;
  const std::string owner_;
  std::map<int, std::deque<DataChunkRef>> out_;
  std::vector<std::pair<int, DataChunkRef>> kept_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_DATA_LEASES_H_
