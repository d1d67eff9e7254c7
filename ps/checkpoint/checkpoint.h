// What a parameter-server shard's checkpoint holds, as plain C++ values,
// and its encoding on disk (proto/checkpoint.proto framed by
// common/file_io.h's checksummed framing). docs/RELIABILITY.md describes the
// format and when checkpoints are taken; ps/checkpoint/checkpoint_store.h lays
// the files out in a directory.
//
//   ShardCheckpoint c = ...;                         // the shard's snapshot
//   std::string bytes = EncodeShardCheckpoint(c);    // framed, checksummed
//   ASSIGN_OR_RETURN(ShardCheckpoint back,
//                    DecodeShardCheckpoint(bytes,
//                    "step-40/shard-0-of-2.ckpt"));
//
// Thread-safety: plain values and pure functions. A ShardCheckpoint's
// weights are an immutable snapshot that may be shared between threads.
#ifndef PSGD_PS_CHECKPOINT_CHECKPOINT_H_
#define PSGD_PS_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ps/state/data_queue.h"
#include "ps/state/optimizer.h"
#include "ps/state/types.h"
#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

// The formats this build writes and reads: a shard file's (3 since
// 2026-11-28, when a variable's identity became one VariableSpec message and
// the mode and optimizer enums; 2 from 2026-11-26, when each variable got its
// kind; older files are refused with a message naming their version and the
// last commit that wrote it) and a manifest's (unchanged).
constexpr int kCheckpointFormatVersion = 3;
constexpr int kManifestFormatVersion = 1;

// A shard's whole state at one step. The pending aggregate of a sync step is
// not part of it (as TensorFlow's SyncReplicasOptimizer drops its
// accumulators on restore): last_push_step is at most step - 1, so the
// workers that had pushed for the pending step push for it again.
struct ShardCheckpoint {
  // Which checkpoint of which cluster this is.
  std::string cluster;
  int shard_index = 0;
  int num_shards = 1;
  int64_t label = 0;       // DIR/step-<label>/
  int64_t generation = 1;  // the cluster's generation when saved
  Mode mode = Mode::kSync;
  int total_num_replicas = 1;
  absl::Time saved = absl::UnixEpoch();

  // The state.
  int64_t step = 0;
  std::shared_ptr<const WeightsSnapshot> weights;  // names, shapes, values
  OptimizerState optimizer;
  std::vector<int64_t> last_push_step;  // by worker id
  std::vector<int> live_workers;        // ascending
  PushCounters counters;
  std::map<int64_t, int64_t> staleness_histogram;
  int64_t workers_expired = 0;
  std::vector<RollbackRecord> rollbacks;
  // Shard 0 with the data queue on: its position and the ledger file's
  // length (-1: no ledger) when saved.
  std::optional<DataQueueState> data_queue;
  int64_t ledger_bytes = -1;
};

// A fingerprint of a shard's learned state: CRC-32C over every variable's
// name and float32 bytes (trained parameters and running statistics) in
// layout order, then the optimizer's kind, step and every slot's bytes.
// Two states with the same digest are, for any practical purpose, equal
// bit for bit: a restarted server logs the digest of what it restored
// (docs/RELIABILITY.md) and `ckpt_tool digest FILE` prints the file's, so
// that a test can check a restore bit for bit.
uint32_t StateDigest(const WeightsSnapshot& weights,
                     const OptimizerState& optimizer);

// The checkpoint's bytes: a ckpt.ShardCheckpoint framed with magic
// "PSGDCKPT", its length and its CRC-32C.
std::string EncodeShardCheckpoint(const ShardCheckpoint& checkpoint);

// The checkpoint in `bytes`. DATA_LOSS naming `filename` and what is wrong:
// a bad magic, length or checksum (a truncated or corrupt file), bytes that
// do not parse, another format version, or contents that do not fit
// together (a tensor whose data does not match its shape, a slot of the
// wrong size, a non-finite weight, ...).
absl::StatusOr<ShardCheckpoint> DecodeShardCheckpoint(
    absl::string_view bytes, absl::string_view filename);

// The manifest of one checkpoint: which file holds each shard.
struct CheckpointManifest {
  struct Entry {
    int shard_index = 0;
    std::string file;  // name within the step directory
    int64_t bytes = 0;
    uint32_t crc32c = 0;  // of the whole file
    int64_t step = 0;
  };
  std::string cluster;
  int64_t label = 0;
  int64_t generation = 1;
  int num_shards = 1;
  std::vector<Entry> shards;  // by shard index
};

// Framed with magic "PSGDMANI".
std::string EncodeCheckpointManifest(const CheckpointManifest& manifest);
// DATA_LOSS naming `filename`, as DecodeShardCheckpoint; also when the
// entries are not exactly shards 0..num_shards-1.
absl::StatusOr<CheckpointManifest> DecodeCheckpointManifest(
    absl::string_view bytes, absl::string_view filename);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CHECKPOINT_CHECKPOINT_H_
