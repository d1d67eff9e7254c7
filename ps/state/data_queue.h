// The data queue: a parameter-server shard hands out the training data in
// chunks, so that every sample is trained on exactly once per epoch however
// the workers come, go, straggle or have their gradients dropped. In the
// spirit of Horovod's elastic sampler (horovod/torch/elastic/sampler.py: a
// sampler that knows what it has processed) and MosaicML Streaming's
// elastic determinism, but owned by the servers, where the gradients are
// accepted or refused. Issue 31, item 1; wiring it into the shard, the wire
// and the checkpoints is not here.
//
// Epochs and chunks. Epoch e is a permutation of the sample indices
// [0, num_samples): EpochPermutation(num_samples, seed, e), a Fisher-Yates
// shuffle driven by SplitMix64 (below, written out so that
// scripts/ledger_check.py computes the identical permutation; std::
// distributions are implementation-defined). The permutation is cut into
// ChunksPerEpoch() chunks of chunk_size consecutive positions: chunk
// (e, i) holds positions [i * chunk_size, min(num_samples, (i + 1) *
// chunk_size)), the last one shorter when chunk_size does not divide
// num_samples. A chunk is a worker's batch.
//
// A chunk's life. Lease() hands one out under a lease id (unique and
// increasing for the life of the object, across restores). Then exactly one
// of:
//   * Done: its gradient was applied (or aggregated): the chunk is complete;
//   * Return: its gradient was dropped (stale, surplus, refused): the chunk
//     goes back to the queue;
//   * WorkerGone: its worker left: every chunk it holds goes back.
// Lease() serves the chunks that went back first, lowest (epoch, index)
// first, but not to the worker whose gradient of a chunk was dropped while the
// current epoch has a chunk never leased (that worker gets such a chunk,
// and the returned one waits for another worker): a backup worker that is
// always the last of its step has its chunk returned at every step, and would
// otherwise lease the same chunk again and again, which then never
// completes its epoch (found by data_exactly_once_test after a rollback
// left one worker a step's phase behind the others); then the next
// never-leased chunk of the current epoch; once every
// chunk of the current epoch has been leased, the next epoch begins. Chunks
// of an older epoch still out may complete or come back after that (and
// are then leased before the new epoch's). An epoch is complete when all of
// its chunks are done.
//
// Generations. Restore() starts a new generation: every lease made before
// it is void (refused), and every chunk that was out (leased or back in the
// queue) at snapshot time is in the queue, since its gradient is not in the
// checkpointed weights. A lease id carries its generation in its high bits
// (LeaseGeneration()), so a void lease is refused naming both generations.
//
// Refusals change nothing (the counters included). Done and Return return:
//   INVALID_ARGUMENT     a negative worker, epoch or index, or an index at or
//                        past ChunksPerEpoch();
//   NOT_FOUND            an epoch that has not begun, a chunk of the current
//                        epoch never leased, a lease id never issued;
//   FAILED_PRECONDITION  a chunk already done or returned (twice), a lease
//                        that is not the chunk's current one (an older lease
//                        of the chunk, another chunk's lease), a lease of an
//                        earlier generation (void since a Restore);
//   PERMISSION_DENIED    the worker does not hold the chunk's lease.
//
// The ledger. set_on_done() installs a callback run on every Done with the
// chunk's samples, so that a shard can write which samples each applied
// gradient carried. FormatLedgerLine() writes one line of the ledger file
// that scripts/ledger_check.py reads, a JSON object per line:
//   {"epoch":E,"index":I,"worker":W,"step":S,"generation":G,"first":F,
//    "count":N}
// E, I: the chunk; W: the worker that computed the gradient; S: the global
// step it was applied at (-1 where there is none, async); G: the queue's
// generation; F: the chunk's first sample (permutation position
// I * chunk_size) and N its number of samples, which the script checks
// against its own permutation. Keys may come in any order; the script
// ignores keys it does not know. After a Restore, lines written since the
// snapshot describe gradients the restored weights do not have: the shard
// cuts its ledger back to the snapshot (it is the shard's file).
//
// The end of a run's data. A run of E epochs hands out no chunk of epoch E:
// once NextLeaseEpoch() >= E nothing is left to hand out, but chunks of the
// first E epochs may still be out (LeasedBefore(E)), and any of them may
// come back (its gradient dropped, its worker gone) and need another
// worker. The data has ended when EpochsDone(E): every chunk of the first E
// epochs is done.
//
// Thread-safety: none; the shard calls it under its own mutex. The on_done
// callback runs inside Done, so under that mutex too.
#ifndef PSGD_PS_STATE_DATA_QUEUE_H_
#define PSGD_PS_STATE_DATA_QUEUE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psgd {
namespace ps {

// SplitMix64 (Steele, Lea and Flood 2014; Vigna's reference code): the
// state advances by 0x9E3779B97F4A7C15 and each output is the state mixed:
//   z = state += 0x9E3779B97F4A7C15
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//   z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//   return z ^ (z >> 31)                       (all mod 2^64)
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next();
  // Uniform in [0, n), n >= 1, without modulo bias: draws r = Next() until
  // r >= 2^64 mod n, then returns r mod n.
  uint64_t Below(uint64_t n);

 private:
  uint64_t state_;
};

// Epoch `epoch`'s permutation of [0, num_samples). The generator starts at
// state seed ^ SplitMix64(epoch).Next() (the epoch as unsigned 64 bits);
// perm = [0, 1, ..., num_samples - 1]; for i = num_samples - 1 down to 1:
// swap perm[i] and perm[Below(i + 1)]. num_samples >= 0, epoch >= 0.
std::vector<int64_t> EpochPermutation(int64_t num_samples, uint64_t seed,
                                      int64_t epoch);

struct DataQueueOptions {
  int64_t num_samples = 0;  // > 0, at most kMaxDataQueueSamples
  int64_t chunk_size = 0;   // > 0; a batch
  uint64_t seed = 0;
};

// A permutation is cached per epoch in progress: 8 bytes a sample.
inline constexpr int64_t kMaxDataQueueSamples = int64_t{1} << 31;

// INVALID_ARGUMENT naming the field and its value.
absl::Status ValidateDataQueueOptions(const DataQueueOptions& o);

struct DataChunk {
  int64_t epoch = 0;
  int64_t index = 0;
  uint64_t lease = 0;
  int64_t generation = 0;
  std::vector<int64_t> samples;  // the chunk's sample indices, in order
};

// A leased chunk as a worker names it when it gives it back.
struct DataChunkRef {
  int64_t epoch = 0;
  int64_t index = 0;
  uint64_t lease = 0;

  bool operator==(const DataChunkRef& o) const {
    return epoch == o.epoch && index == o.index && lease == o.lease;
  }
};

// A chunk leased now, and the worker that holds it.
struct LeasedChunk {
  int64_t epoch = 0;
  int64_t index = 0;
  uint64_t lease = 0;
  int worker = -1;
};

// The start of the message of a lease that waits for the last epoch's
// chunks still out (ParameterShard::LeaseData's UNAVAILABLE, whose
// LeaseRefusal::kNotEnded the worker reads: it leases again after a pause
// instead of ending).
inline constexpr char kDataNotEnded[] = "the data has not ended";

// One epoch in progress, for a checkpoint.
struct DataQueueEpochState {
  int64_t epoch = 0;
  // Chunks [0, next_index) have been leased at least once.
  int64_t next_index = 0;
  // The chunks below next_index not done (leased or back in the queue),
  // ascending.
  std::vector<int64_t> outstanding;
};

struct DataQueueCounters {
  int64_t leased = 0;    // leases made (a chunk leased again counts again)
  int64_t done = 0;      // chunks done
  int64_t returned = 0;  // chunks back in the queue by Return or WorkerGone
                         // (a Restore queues the outstanding ones too, but
                         // restores the counters as they were at the
                         // snapshot)
  int64_t epochs_completed = 0;
};

// The queue's position, constant size in the number of samples: the epochs
// in progress and the outstanding chunks in them. On disk it is
// proto/data_queue.proto's DataQueueState, converted in ps/wire/data_queue.h.
struct DataQueueState {
  // The options it was made with; Restore refuses others.
  int64_t num_samples = 0;
  int64_t chunk_size = 0;
  uint64_t seed = 0;
  int64_t generation = 0;
  // The next lease's sequence number in its generation (the low bits).
  uint64_t next_lease_sequence = 0;
  // Ascending, at least one; the last is the current epoch, which alone
  // may have chunks never leased. The others have outstanding chunks.
  std::vector<DataQueueEpochState> epochs;
  DataQueueCounters counters;
};

// Where the queue is, for logs and metrics.
struct DataQueuePosition {
  int64_t epoch = 0;            // the current epoch
  int64_t chunks_done = 0;      // chunks of it done
  int64_t chunks_in_epoch = 0;  // ChunksPerEpoch()
  int64_t chunks_out = 0;       // leased now, in every epoch
  int64_t chunks_queued = 0;    // back in the queue, in every epoch
};

class DataQueue {
 public:
  using OnDone = std::function<void(int worker, int64_t epoch, int64_t index,
                                    const std::vector<int64_t>& samples)>;

  // A lease id: generation << kLeaseSequenceBits | sequence.
  static constexpr int kLeaseSequenceBits = 40;
  static constexpr int64_t kMaxGeneration =
      (int64_t{1} << (63 - kLeaseSequenceBits)) - 1;
  static int64_t LeaseGeneration(uint64_t lease) {
    return static_cast<int64_t>(lease >> kLeaseSequenceBits);
  }

  // Generation 0, epoch 0, nothing leased. INVALID_ARGUMENT as
  // ValidateDataQueueOptions.
  static absl::StatusOr<DataQueue> Create(const DataQueueOptions& options);

  // A queue at `state`'s position in generation max(state.generation + 1,
  // min_generation); a shard restarted from a checkpoint passes its
  // cluster's generation as min_generation, so that restoring the same
  // checkpoint twice still gives a new generation. INVALID_ARGUMENT: bad
  // options, or a state made with other options (naming both values);
  // DATA_LOSS: a state that is not consistent (indices out of range, out of
  // order, counters negative); OUT_OF_RANGE: a generation past
  // kMaxGeneration.
  static absl::StatusOr<DataQueue> Restore(const DataQueueOptions& options,
                                           const DataQueueState& state,
                                           int64_t min_generation = 0);
  // The same in place (a rollback): the generation becomes
  // max(generation(), state.generation) + 1 and the lease ids keep
  // increasing, so every lease this object made is void. The on_done
  // callback stays. The codes of the static Restore; on error nothing
  // changes.
  absl::Status Restore(const DataQueueState& state);

  DataQueue(DataQueue&&) = default;
  DataQueue& operator=(DataQueue&&) = default;
  DataQueue(const DataQueue&) = delete;
  DataQueue& operator=(const DataQueue&) = delete;

  // The epoch of the chunk the next Lease would hand out (a chunk back in
  // the queue, else the current epoch's next, else the next epoch's first).
  int64_t NextLeaseEpoch() const;
  // The chunks of epochs [0, epochs) leased now (neither done nor back in
  // the queue), lowest (epoch, index) first.
  std::vector<LeasedChunk> LeasedBefore(int64_t epochs) const;
  // Whether every chunk of epochs [0, epochs) is done: nothing of them is
  // left to hand out (NextLeaseEpoch() >= epochs) and none is out. True for
  // epochs <= 0.
  bool EpochsDone(int64_t epochs) const;
  // The next chunk for `worker_id` (see the order above). INVALID_ARGUMENT:
  // a negative worker; RESOURCE_EXHAUSTED: 2^40 leases in one generation.
  absl::StatusOr<DataChunk> Lease(int worker_id);
  // Refusals: the codes above.
  absl::Status Done(int worker_id, int64_t epoch, int64_t index,
                    uint64_t lease);
  // `dropped`: the chunk's gradient was dropped (stale, surplus, refused),
  // and the chunk goes to another worker first (the order above);
  // otherwise (given back unused, its worker gone) to whoever leases next.
  absl::Status Return(int worker_id, int64_t epoch, int64_t index,
                      uint64_t lease, bool dropped = false);
  // Every chunk `worker_id` holds goes back; returns how many.
  // INVALID_ARGUMENT: a negative worker.
  absl::StatusOr<int64_t> WorkerGone(int worker_id);

  DataQueueState Snapshot() const;

  void set_on_done(OnDone on_done) { on_done_ = std::move(on_done); }

  const DataQueueOptions& options() const { return options_; }
  int64_t ChunksPerEpoch() const { return chunks_per_epoch_; }
  int64_t generation() const { return generation_; }
  const DataQueueCounters& counters() const { return counters_; }
  DataQueuePosition Position() const;
  // The samples of chunk (epoch, index) of an epoch in progress; empty for
  // another.
  std::vector<int64_t> ChunkSamples(int64_t epoch, int64_t index) const;

 private:
  enum class ChunkState { kLeased, kQueued };
  struct Outstanding {
    ChunkState state = ChunkState::kQueued;
    uint64_t lease = 0;    // the last lease made of it
    int worker = -1;       // its holder while leased
    int returned_by = -1;  // while queued: the worker whose Return queued it
  };
  struct Epoch {
    std::vector<int64_t> permutation;
    int64_t next_index = 0;
    std::map<int64_t, Outstanding> outstanding;  // by index
  };

  DataQueue(const DataQueueOptions& options, int64_t chunks_per_epoch);
  Epoch NewEpoch(int64_t epoch) const;
  // Checks a Done or Return of a leased chunk: the codes above.
  absl::StatusOr<Outstanding*> FindLeased(int worker_id, int64_t epoch,
                                          int64_t index, uint64_t lease);
  // Counts epoch `epoch` complete if its last chunk is done now, and drops
  // it unless it is the current one.
  void MaybeCompleteEpoch(int64_t epoch);
  std::vector<int64_t> Samples(const Epoch& e, int64_t index) const;

  DataQueueOptions options_;
  int64_t chunks_per_epoch_;
  int64_t generation_ = 0;
  uint64_t next_sequence_ = 0;
  // The epochs in progress, and always the current (last) one.
  std::map<int64_t, Epoch> epochs_;
  std::set<std::pair<int64_t, int64_t>> queued_;  // (epoch, index)
  DataQueueCounters counters_;
  OnDone on_done_;
};

// One line of the ledger (the format above), without the newline.
std::string FormatLedgerLine(int worker, int64_t step, int64_t generation,
                             int64_t epoch, int64_t index,
                             absl::Span<const int64_t> samples);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_DATA_QUEUE_H_
