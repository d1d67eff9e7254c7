// A shard's checkpoints in a directory that every shard of the cluster
// sees (docs/RELIABILITY.md):
//
//   DIR/step-<label>/shard-<i>-of-<n>.ckpt   shard i's state
//   (ps/checkpoint/checkpoint.h) DIR/step-<label>/MANIFEST written once all n
//   files are
//                                            there with one generation
//
// Each file is written atomically (temporary file, fsync, rename, fsync of
// the directory). A checkpoint is complete when its MANIFEST is there and
// every file it names has the size and CRC-32C it records, decodes, and
// agrees with it on cluster, shard, label and generation. Restoring takes
// the newest complete checkpoint and names every newer one it refused and
// why. After each write the store keeps the newest `keep` complete
// checkpoints and deletes this shard's part of older ones.
//
// Every shard writes and deletes only its own files; MANIFEST files are
// written by whichever shard completes the set (identical bytes if two do)
// and deleted by any.
//
// Per host (options.per_host: each shard has a directory of its own, which
// no other shard sees): DIR/step-<label>/shard-<i>-of-<n>.ckpt only, no
// MANIFEST. A checkpoint is complete *here* when this shard's file decodes
// (its framing checksum) and names this cluster, shard and label;
// whether every shard has it is agreed over RPC
// (ps/checkpoint/agreement.h), so ReadNewestComplete is not used then.
//
// Thread-safety: thread-safe; one mutex orders this object's file
// operations (the writer thread's saves and a rollback's read).
#ifndef PSGD_PS_CHECKPOINT_CHECKPOINT_STORE_H_
#define PSGD_PS_CHECKPOINT_CHECKPOINT_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "ps/checkpoint/checkpoint.h"

namespace psgd {
namespace ps {

struct CheckpointStoreOptions {
  std::string dir;
  std::string cluster;
  int shard_index = 0;
  int num_shards = 1;
  // Complete checkpoints kept (>= 1).
  int keep = 3;
  // The directory is this shard's own (see above).
  bool per_host = false;
  // Writes this shard's file (path, bytes); unset: WriteFileAtomically.
  // For tests that hold or fail the disk (CheckpointOptions::write_file).
  std::function<absl::Status(const std::string&, absl::string_view)>
      write_file = nullptr;
};

// A checkpoint complete in one shard's directory.
struct CompleteCheckpointInfo {
  int64_t label = 0;
  int64_t generation = 1;
  int64_t step = 0;

  bool operator==(const CompleteCheckpointInfo& o) const {
    return label == o.label && generation == o.generation && step == o.step;
  }
};

class CheckpointStore {
 public:
  // Creates the directory when missing. INVALID_ARGUMENT for bad options,
  // INTERNAL when the directory cannot be made.
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(
      CheckpointStoreOptions options);

  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  const CheckpointStoreOptions& options() const { return options_; }
  std::string StepDir(int64_t label) const;
  // "shard-<i>-of-<n>.ckpt"
  std::string ShardFileName(int shard_index) const;

  // Writes this shard's file of checkpoint c.label, then the MANIFEST when
  // every shard's file of that label is there with c.generation, then
  // deletes this shard's part of checkpoints older than the newest `keep`
  // complete ones. INVALID_ARGUMENT when `c` is another shard's or
  // cluster's; INTERNAL naming the path when a file cannot be written.
  absl::Status Write(const ShardCheckpoint& c);

  // This shard's part of the newest checkpoint that is complete for every
  // shard. Each newer checkpoint that was refused (no manifest: partial; a
  // file missing, truncated or corrupt; generations that differ) is named
  // in *refused with the reason, newest first. NOT_FOUND when no checkpoint
  // is complete.
  absl::StatusOr<ShardCheckpoint> ReadNewestComplete(
      std::vector<std::string>* refused);

  // This shard's part of checkpoint `label`, verified as complete.
  // NOT_FOUND when there is no such checkpoint, DATA_LOSS naming the file
  // and the reason when it is not complete.
  absl::StatusOr<ShardCheckpoint> Read(int64_t label);

  // Deletes this shard's files of every checkpoint newer than `label`, and
  // their manifests: after a rollback to `label` they belong to an abandoned
  // history. INTERNAL naming the path on failure.
  absl::Status DeleteNewerThan(int64_t label);

  // The checkpoints complete here, newest first: complete for every shard
  // (shared directory) or this shard's file (per host).
  std::vector<CompleteCheckpointInfo> ListComplete();

  // Whether checkpoint `label` is marked complete here: its MANIFEST is
  // there (shared directory) or this shard's file (per host). A mark, not a
  // verification (Read verifies).
  bool IsMarkedComplete(int64_t label) const;

  // Labels that have a step directory, ascending.
  std::vector<int64_t> Labels() const;

 private:
  explicit CheckpointStore(CheckpointStoreOptions options)
      : options_(std::move(options)) {}

  std::vector<int64_t> LabelsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks checkpoint `label` as described for Read; returns this shard's
  // part.
  absl::StatusOr<ShardCheckpoint> VerifyLocked(int64_t label) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the MANIFEST of `label` if every shard's file is there with
  // `generation`.
  absl::Status MaybeWriteManifestLocked(int64_t label, int64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes this shard's files (and temporary files), the manifest and, if
  // then empty, the directory of checkpoint `label`.
  absl::Status RemoveOwnLocked(int64_t label)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PruneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsMarkedCompleteLocked(int64_t label) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CheckpointStoreOptions options_;
  mutable Mutex mu_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CHECKPOINT_CHECKPOINT_STORE_H_
