// A shard's data room (docs/PS.md, "The servers hand out the data"): the
// data queue it hands out and the leases on it (ps/state/data_leases.h,
// shard 0 with options().data_queue_on), the ledger lines of the chunks its
// updates trained on, and the queue and the ledger's length in its
// checkpoints. ParameterShard checks who may lease (open, generation, a
// live member) before it asks; what the data itself refuses is here.
//
// The ledger file is the shard's (ps/state/ledger.h): it writes the lines
// after its lock (ParameterShard::RunReady); the room adds them under it.
//
// Thread-safety: none, as DataLeases: the shard calls it under its mutex.
#ifndef PSGD_PS_SHARD_SHARD_DATA_ROOM_H_
#define PSGD_PS_SHARD_SHARD_DATA_ROOM_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/state/data_leases.h"
#include "ps/state/data_queue.h"
#include "ps/state/ledger.h"
#include "ps/state/options.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

class ShardDataRoom {
 public:
  // `options` outlives the room (the shard's); `name` names the shard in
  // messages ("shard 0").
  ShardDataRoom(const ShardOptions& options, std::string name);
  ShardDataRoom(const ShardDataRoom&) = delete;
  ShardDataRoom& operator=(const ShardDataRoom&) = delete;

  // Makes the data queue (options().data_queue_on); the codes of
  // DataQueue::Create.
  absl::Status OpenQueue();
  // The shard's ledger, for the lines; null without a ledger file. Not
  // owned: it outlives the room.
  void set_ledger(Ledger* ledger) { ledger_ = ledger; }

  // The leases, for the coordinator's rules; null without the data queue.
  DataLeases* leases() { return leases_.has_value() ? &*leases_ : nullptr; }
  bool has_ledger() const { return ledger_ != nullptr; }

  // FAILED_PRECONDITION without the data queue (ParameterShard::LeaseData).
  absl::Status CheckQueue() const;
  // DataLeases::Lease; the queue must be there (CheckQueue).
  absl::StatusOr<DataChunk> Lease(int worker_id, const DataChunkRef* give_back,
                                  int64_t step,
                                  absl::FunctionRef<std::set<int>()> pulling);
  // Where the queue is; nullopt without one.
  std::optional<DataQueuePosition> Position() const;

  // An update was applied at `step`: with the queue, the chunks it trained
  // on are done and in the ledger; without it, the ledger lines of `chunks`
  // (the decision's).
  void Applied(int64_t step, const std::vector<DecidedChunk>& chunks);
  // The worker's chunks back to the queue (it left).
  void Gone(int worker_id);

  // The queue of checkpoint `c` (nullopt without a queue here), made before
  // a restore or rollback changes anything; then installed by Install, with
  // the ledger cut back to its length then.
  absl::StatusOr<std::optional<DataQueue>> QueueOf(
      const ShardCheckpoint& c) const;
  void Install(std::optional<DataQueue> queue, const ShardCheckpoint& c);
  // The queue and the ledger's length (written first) into `c`.
  void Save(ShardCheckpoint* c);

  // The data queue's fields of ShardStatus.
  void AddStatus(ShardStatus* s) const;

 private:
  const ShardOptions& options_;
  const std::string name_;
  // The data handed out (data_queue_on).
  std::optional<DataLeases> leases_;
  Ledger* ledger_ = nullptr;  // Not owned; null without a ledger file
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_SHARD_DATA_ROOM_H_
