// A shard's checkpoints (docs/RELIABILITY.md): the checkpoint store and its
// writer thread (ps/checkpoint/checkpoint_writer.h), when to save (step 0,
// every checkpoint.every_steps, a requested label, at shutdown), the
// agreement of per-host checkpoints, the restore at creation and the wait
// for the rollback after it, and the rollbacks made.
//
// The room knows the checkpoint's files and header (cluster, shard, mode,
// workers, label) and its own fields; the shard's state in a checkpoint
// (weights, slots, step, generation, membership, counters, data queue) is
// the shard's to copy and install, through the narrow Core it lends each
// call. A restore or rollback reads its file without the shard's lock:
// store() hands out the thread-safe store for that.
//
// Thread-safety: none, as the Coordinator: the shard calls it under its
// mutex. store() and writer() are thread-safe and live as long as the room;
// they may be used after the lock.
#ifndef PSGD_PS_SHARD_SHARD_CHECKPOINTING_H_
#define PSGD_PS_SHARD_SHARD_CHECKPOINTING_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/checkpoint/checkpoint_store.h"
#include "ps/checkpoint/checkpoint_writer.h"
#include "ps/state/options.h"
#include "ps/state/types.h"
#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

class ShardCheckpointing {
 public:
  // What a restore found (ParameterShard::restore_report()).
  struct RestoreReport {
    int64_t label = -1;  // the checkpoint; -1: none (the shard starts empty)
    int64_t step = 0;
    int64_t generation = 1;
    // Newer checkpoints refused, with the file and the reason, newest first.
    std::vector<std::string> refused;
    // StateDigest of the state installed (weights, statistics, slots), as
    // the shard holds it after the restore.
    uint32_t digest = 0;
  };

  // The shard's side of a checkpoint, called under the shard's mutex.
  class Core {
   public:
    // Whether the shard holds variables (Initialize or a restore).
    virtual bool HasVariablesLocked() const = 0;
    // Copies the shard's state into `c`: all but the header and the
    // rollbacks, which are the room's.
    virtual void SaveStateLocked(ShardCheckpoint* c) = 0;
    // Replaces the state (all but the live set, unless `restart`) with
    // `c`'s, tagged with `generation`; nothing changes on error.
    virtual absl::Status InstallStateLocked(const ShardCheckpoint& c,
                                            bool restart,
                                            int64_t generation) = 0;
    // A new generation (a restore or rollback): no decision of the old one
    // counts.
    virtual void EnterGenerationLocked(int64_t generation) = 0;
    // StateDigest of the state installed, for the report.
    virtual uint32_t DigestLocked() const = 0;

   protected:
    ~Core() = default;
  };

  // `options` outlives the room (the shard's); `name` names the shard in
  // messages ("shard 0").
  ShardCheckpointing(const ShardOptions& options, std::string name);
  ShardCheckpointing(const ShardCheckpointing&) = delete;
  ShardCheckpointing& operator=(const ShardCheckpointing&) = delete;

  // The store of options.checkpoint (the directory made or read); INTERNAL
  // when it cannot be. Needs no lock.
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> OpenStore(
      const ShardOptions& options);
  // Takes `store`: per host, the room is agreeing (RestoreAgreed);
  // otherwise it restores the newest complete checkpoint into `core`, if
  // any (report() says which, and what it refused). FAILED_PRECONDITION
  // for a checkpoint of another cluster or of other options.
  absl::Status Open(std::unique_ptr<CheckpointStore> store, Core& core);
  // What the restore at Open or the agreement's end found.
  const RestoreReport& report() const { return report_; }

  // The store and the writer; null without a checkpoint directory.
  CheckpointStore* store() const;
  CheckpointWriter* writer() const { return writer_.get(); }

  bool agreeing() const { return agreeing_; }
  // FAILED_PRECONDITION unless agreeing.
  absl::Status CheckAgreeing() const;
  // The agreement ends with no checkpoint: the shard starts empty.
  void EndAgreement() { agreeing_ = false; }
  // Installs checkpoint `c`, read from file step-`label`, as the shard's
  // state when it starts (at Open or the agreement's end); the shard then
  // awaits the rollback to it. Nothing changes on error.
  absl::Status Restore(const ShardCheckpoint& c, int64_t label, Core& core);
  // Restored, and waiting for the cluster's rollback to the checkpoint.
  bool awaiting_rollback() const { return awaiting_rollback_; }

  // Saves the state now as checkpoint `label`; nothing without a
  // checkpoint directory, before the shard has variables or while awaiting
  // the rollback.
  void Save(int64_t label, Core& core);
  // Once after each step, at `step` (when the counters are up to date):
  // saves when the step is a multiple of every_steps or reaches a requested
  // label.
  void MaybeSave(int64_t step, Core& core);
  // At shutdown: saves step `step` unless it is saved already.
  void SaveUnsaved(int64_t step, Core& core);
  // ParameterShard::RequestCheckpoint at `step`, once the shard is open:
  // its FAILED_PRECONDITION and INVALID_ARGUMENT.
  absl::Status Request(int64_t label, bool now, int64_t step, Core& core);

  // ParameterShard::Rollback's INVALID_ARGUMENT and FAILED_PRECONDITION,
  // each message after `context`. Needs no state.
  absl::Status CheckRollback(int64_t label, int64_t generation,
                             const std::string& context) const;
  // The shard awaits the rollback to the checkpoint it restored, `label`.
  bool AwaitsRollbackTo(int64_t label) const {
    return awaiting_rollback_ && label == report_.label;
  }
  // The cluster rolled back to checkpoint `label` and entered
  // `generation`, and the shard went from step `from` to `to`: recorded,
  // and its files of later checkpoints deleted. The shard has its state.
  void RolledBack(int64_t generation, int64_t label, int64_t from, int64_t to);
  // Installs checkpoint `c` (file step-`label`) for the rollback to
  // `generation` of a shard at step `from`, then RolledBack. Errors after
  // `context`; nothing changes on error.
  absl::Status RollBackTo(const ShardCheckpoint& c, int64_t label,
                          int64_t generation, int64_t from,
                          const std::string& context, Core& core);

  // The checkpoint fields of ShardStatus (the restored label is the
  // report's).
  void AddStatus(ShardStatus* s) const;

  // A checkpoint's variables as tensors over its weights (which must
  // outlive them).
  static std::vector<TensorBytes> Variables(const WeightsSnapshot& w);

 private:
  // Installs `c`'s state (FAILED_PRECONDITION for another cluster's or
  // other options'), then the room's fields.
  absl::Status Install(const ShardCheckpoint& c, bool restart,
                       int64_t generation, Core& core);

  const ShardOptions& options_;
  const std::string name_;
  // Constant after Open. Null without a checkpoint directory.
  std::unique_ptr<CheckpointWriter> writer_;
  // Per-host checkpoints: until RestoreAgreed.
  bool agreeing_ = false;
  bool awaiting_rollback_ = false;
  std::set<int64_t> requested_labels_;
  int64_t last_saved_step_ = -1;
  std::vector<RollbackRecord> rollbacks_;
  RestoreReport report_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_SHARD_CHECKPOINTING_H_
