#include "ps/state/data_queue.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {
namespace {

constexpr uint64_t kMaxSequence =
    (uint64_t{1} << DataQueue::kLeaseSequenceBits);

std::string ChunkName(int64_t epoch, int64_t index) {
  return absl::StrCat("chunk (epoch ", epoch, ", index ", index, ")");
}

}  // namespace

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::Below(uint64_t n) {
  // 2^64 mod n, in unsigned arithmetic: (2^64 - n) mod n.
  const uint64_t threshold = (0 - n) % n;
  uint64_t r;
  do {
    r = Next();
  } while (r < threshold);
  return r % n;
}

std::vector<int64_t> EpochPermutation(int64_t num_samples, uint64_t seed,
                                      int64_t epoch) {
  std::vector<int64_t> perm(std::max<int64_t>(num_samples, 0));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  SplitMix64 rng(seed ^ SplitMix64(static_cast<uint64_t>(epoch)).Next());
  for (int64_t i = num_samples - 1; i >= 1; --i) {
    const int64_t j = static_cast<int64_t>(rng.Below(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

absl::Status ValidateDataQueueOptions(const DataQueueOptions& o) {
  if (o.num_samples <= 0 || o.num_samples > kMaxDataQueueSamples) {
    return absl::InvalidArgumentError(
        absl::StrCat("data queue: num_samples ", o.num_samples,
                     " is not in 1..", kMaxDataQueueSamples));
  }
  if (o.chunk_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data queue: chunk_size ", o.chunk_size, " is not positive"));
  }
  return absl::OkStatus();
}

DataQueue::DataQueue(const DataQueueOptions& options, int64_t chunks_per_epoch)
    : options_(options), chunks_per_epoch_(chunks_per_epoch) {}

absl::StatusOr<DataQueue> DataQueue::Create(const DataQueueOptions& options) {
  if (absl::Status s = ValidateDataQueueOptions(options); !s.ok()) return s;
  const int64_t chunks = options.num_samples / options.chunk_size +
                         (options.num_samples % options.chunk_size != 0);
  DataQueue q(options, chunks);
  q.epochs_.emplace(0, q.NewEpoch(0));
  return q;
}

DataQueue::Epoch DataQueue::NewEpoch(int64_t epoch) const {
  Epoch e;
  e.permutation = EpochPermutation(options_.num_samples, options_.seed, epoch);
  return e;
}

std::vector<int64_t> DataQueue::Samples(const Epoch& e, int64_t index) const {
  const int64_t begin = index * options_.chunk_size;
  const int64_t end =
      std::min(options_.num_samples, begin + options_.chunk_size);
  return std::vector<int64_t>(e.permutation.begin() + begin,
                              e.permutation.begin() + end);
}

std::vector<int64_t> DataQueue::ChunkSamples(int64_t epoch,
                                             int64_t index) const {
  auto it = epochs_.find(epoch);
  if (it == epochs_.end() || index < 0 || index >= chunks_per_epoch_) {
    return {};
  }
  return Samples(it->second, index);
}

int64_t DataQueue::NextLeaseEpoch() const {
  if (!queued_.empty()) return queued_.begin()->first;
  const auto& [epoch, e] = *epochs_.rbegin();
  return e.next_index == chunks_per_epoch_ ? epoch + 1 : epoch;
}

std::vector<LeasedChunk> DataQueue::LeasedBefore(int64_t epochs) const {
  std::vector<LeasedChunk> leased;
  for (const auto& [epoch, e] : epochs_) {
    if (epoch >= epochs) break;
    for (const auto& [index, o] : e.outstanding) {
      if (o.state != ChunkState::kLeased) continue;
      leased.push_back({epoch, index, o.lease, o.worker});
    }
  }
  return leased;
}

bool DataQueue::EpochsDone(int64_t epochs) const {
  if (epochs <= 0) return true;
  if (NextLeaseEpoch() < epochs) return false;
  for (const auto& [epoch, e] : epochs_) {
    if (epoch >= epochs) break;
    if (!e.outstanding.empty()) return false;
  }
  return true;
}

absl::StatusOr<DataChunk> DataQueue::Lease(int worker_id) {
  if (worker_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data queue: worker ", worker_id, " is negative"));
  }
  if (next_sequence_ >= kMaxSequence) {
    return absl::ResourceExhaustedError(
        absl::StrCat("data queue: generation ", generation_, " has made ",
                     kMaxSequence, " leases, the most a lease id holds"));
  }
  int64_t epoch;
  int64_t index;
  // The first queued chunk this worker did not give back; its own only
  // when the current epoch has no never-leased chunk left.
  auto queued = queued_.begin();
  const Epoch& current_epoch = std::prev(epochs_.end())->second;
  if (current_epoch.next_index < chunks_per_epoch_) {
    while (
        queued != queued_.end() &&
        epochs_.at(queued->first).outstanding.at(queued->second).returned_by ==
            worker_id) {
      ++queued;
    }
  }
  if (queued != queued_.end()) {
    std::tie(epoch, index) = *queued;
    queued_.erase(queued);
  } else {
    auto current = std::prev(epochs_.end());
    if (current->second.next_index == chunks_per_epoch_) {
      // Every chunk of the current epoch has been leased: the next begins.
      const int64_t next = current->first + 1;
      if (current->second.outstanding.empty()) epochs_.erase(current);
      current = epochs_.emplace(next, NewEpoch(next)).first;
    }
    epoch = current->first;
    index = current->second.next_index++;
  }
  Epoch& e = epochs_.at(epoch);
  Outstanding& o = e.outstanding[index];
  o.state = ChunkState::kLeased;
  o.lease = (static_cast<uint64_t>(generation_) << kLeaseSequenceBits) |
            next_sequence_++;
  o.worker = worker_id;
  o.returned_by = -1;
  ++counters_.leased;
  DataChunk chunk;
  chunk.epoch = epoch;
  chunk.index = index;
  chunk.lease = o.lease;
  chunk.generation = generation_;
  chunk.samples = Samples(e, index);
  return chunk;
}

absl::StatusOr<DataQueue::Outstanding*> DataQueue::FindLeased(int worker_id,
                                                              int64_t epoch,
                                                              int64_t index,
                                                              uint64_t lease) {
  if (worker_id < 0 || epoch < 0 || index < 0 || index >= chunks_per_epoch_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data queue: worker ", worker_id, ", ", ChunkName(epoch, index),
        ": a worker, epoch and index are not negative and an index is less "
        "than the chunks per epoch (",
        chunks_per_epoch_, ")"));
  }
  const std::string chunk = ChunkName(epoch, index);
  const int64_t lease_generation = LeaseGeneration(lease);
  if (lease_generation < generation_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data queue: lease ", lease, " of ", chunk, " is of generation ",
        lease_generation, ", void since the queue was restored to generation ",
        generation_));
  }
  const uint64_t sequence = lease & (kMaxSequence - 1);
  if (lease_generation > generation_ || sequence >= next_sequence_) {
    return absl::NotFoundError(
        absl::StrCat("data queue: lease ", lease, " of ", chunk,
                     " was never issued (generation ", lease_generation,
                     ", sequence ", sequence, "; the queue is at generation ",
                     generation_, ", next sequence ", next_sequence_, ")"));
  }
  const int64_t current = epochs_.rbegin()->first;
  if (epoch > current) {
    return absl::NotFoundError(absl::StrCat("data queue: ", chunk, ": epoch ",
                                            epoch,
                                            " has not begun (the current "
                                            "epoch is ",
                                            current, ")"));
  }
  auto it = epochs_.find(epoch);
  if (it == epochs_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("data queue: ", chunk, " is already done (epoch ", epoch,
                     " is complete)"));
  }
  Epoch& e = it->second;
  if (index >= e.next_index) {
    return absl::NotFoundError(
        absl::StrCat("data queue: ", chunk, " was never leased"));
  }
  auto o = e.outstanding.find(index);
  if (o == e.outstanding.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("data queue: ", chunk, " is already done"));
  }
  if (o->second.lease != lease) {
    return absl::FailedPreconditionError(
        absl::StrCat("data queue: lease ", lease, " is not ", chunk,
                     "'s current lease (", o->second.lease, ")"));
  }
  if (o->second.state == ChunkState::kQueued) {
    return absl::FailedPreconditionError(
        absl::StrCat("data queue: ", chunk, " under lease ", lease,
                     " was already returned; it is in the queue"));
  }
  if (o->second.worker != worker_id) {
    return absl::PermissionDeniedError(absl::StrCat(
        "data queue: worker ", worker_id, " does not hold lease ", lease,
        " of ", chunk, " (worker ", o->second.worker, " does)"));
  }
  return &o->second;
}

void DataQueue::MaybeCompleteEpoch(int64_t epoch) {
  auto it = epochs_.find(epoch);
  if (it == epochs_.end() || it->second.next_index != chunks_per_epoch_ ||
      !it->second.outstanding.empty()) {
    return;
  }
  ++counters_.epochs_completed;
  if (std::next(it) != epochs_.end()) epochs_.erase(it);
}

absl::Status DataQueue::Done(int worker_id, int64_t epoch, int64_t index,
                             uint64_t lease) {
  absl::StatusOr<Outstanding*> o = FindLeased(worker_id, epoch, index, lease);
  if (!o.ok()) return o.status();
  Epoch& e = epochs_.at(epoch);
  std::vector<int64_t> samples;
  if (on_done_) samples = Samples(e, index);
  e.outstanding.erase(index);
  ++counters_.done;
  MaybeCompleteEpoch(epoch);
  if (on_done_) on_done_(worker_id, epoch, index, samples);
  return absl::OkStatus();
}

absl::Status DataQueue::Return(int worker_id, int64_t epoch, int64_t index,
                               uint64_t lease, bool dropped) {
  absl::StatusOr<Outstanding*> o = FindLeased(worker_id, epoch, index, lease);
  if (!o.ok()) return o.status();
  (*o)->state = ChunkState::kQueued;
  (*o)->worker = -1;
  (*o)->returned_by = dropped ? worker_id : -1;
  queued_.emplace(epoch, index);
  ++counters_.returned;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> DataQueue::WorkerGone(int worker_id) {
  if (worker_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data queue: worker ", worker_id, " is negative"));
  }
  int64_t n = 0;
  for (auto& [epoch, e] : epochs_) {
    for (auto& [index, o] : e.outstanding) {
      if (o.state != ChunkState::kLeased || o.worker != worker_id) continue;
      o.state = ChunkState::kQueued;
      o.worker = -1;
      queued_.emplace(epoch, index);
      ++n;
    }
  }
  counters_.returned += n;
  return n;
}

DataQueuePosition DataQueue::Position() const {
  DataQueuePosition p;
  const auto& [epoch, current] = *epochs_.rbegin();
  p.epoch = epoch;
  p.chunks_done =
      current.next_index - static_cast<int64_t>(current.outstanding.size());
  p.chunks_in_epoch = chunks_per_epoch_;
  p.chunks_queued = static_cast<int64_t>(queued_.size());
  for (const auto& [unused, e] : epochs_) {
    p.chunks_out += static_cast<int64_t>(e.outstanding.size());
  }
  p.chunks_out -= p.chunks_queued;
  return p;
}

DataQueueState DataQueue::Snapshot() const {
  DataQueueState s;
  s.num_samples = options_.num_samples;
  s.chunk_size = options_.chunk_size;
  s.seed = options_.seed;
  s.generation = generation_;
  s.next_lease_sequence = next_sequence_;
  for (const auto& [epoch, e] : epochs_) {
    DataQueueEpochState es;
    es.epoch = epoch;
    es.next_index = e.next_index;
    es.outstanding.reserve(e.outstanding.size());
    for (const auto& [index, unused] : e.outstanding) {
      es.outstanding.push_back(index);
    }
    s.epochs.push_back(std::move(es));
  }
  s.counters = counters_;
  return s;
}

namespace {

// The state's options are the queue's; INVALID_ARGUMENT naming both values.
absl::Status CheckSameOptions(const DataQueueOptions& o,
                              const DataQueueState& s) {
  if (s.num_samples != o.num_samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("data queue state: num_samples ", s.num_samples,
                     " differs from the options' ", o.num_samples));
  }
  if (s.chunk_size != o.chunk_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data queue state: chunk_size ", s.chunk_size,
                     " differs from the options' ", o.chunk_size));
  }
  if (s.seed != o.seed) {
    return absl::InvalidArgumentError(
        absl::StrCat("data queue state: seed ", s.seed,
                     " differs from the options' ", o.seed));
  }
  return absl::OkStatus();
}

// DATA_LOSS naming what is out of range or order.
absl::Status CheckConsistent(const DataQueueState& s, int64_t chunks) {
  if (s.generation < 0 || s.generation > DataQueue::kMaxGeneration) {
    return absl::DataLossError(absl::StrCat("data queue state: generation ",
                                            s.generation, " is not in 0..",
                                            DataQueue::kMaxGeneration));
  }
  if (s.next_lease_sequence >= kMaxSequence) {
    return absl::DataLossError(
        absl::StrCat("data queue state: next_lease_sequence ",
                     s.next_lease_sequence, " is not below ", kMaxSequence));
  }
  const DataQueueCounters& c = s.counters;
  if (c.leased < 0 || c.done < 0 || c.returned < 0 || c.epochs_completed < 0) {
    return absl::DataLossError(
        absl::StrCat("data queue state: a counter is negative (leased ",
                     c.leased, ", done ", c.done, ", returned ", c.returned,
                     ", epochs_completed ", c.epochs_completed, ")"));
  }
  if (s.epochs.empty()) {
    return absl::DataLossError("data queue state: no epoch in progress");
  }
  for (size_t i = 0; i < s.epochs.size(); ++i) {
    const DataQueueEpochState& e = s.epochs[i];
    const std::string where = absl::StrCat("data queue state: epoch ", e.epoch);
    if (e.epoch < 0 || (i > 0 && e.epoch <= s.epochs[i - 1].epoch)) {
      return absl::DataLossError(
          absl::StrCat(where, " is negative or not after the one before"));
    }
    if (e.next_index < 0 || e.next_index > chunks) {
      return absl::DataLossError(absl::StrCat(where, ": next_index ",
                                              e.next_index, " is not in 0..",
                                              chunks, " (chunks per epoch)"));
    }
    const bool last = i + 1 == s.epochs.size();
    if (!last && (e.next_index != chunks || e.outstanding.empty())) {
      return absl::DataLossError(absl::StrCat(
          where, " is not the last, but has chunks never leased (next_index ",
          e.next_index, " of ", chunks, ") or none outstanding"));
    }
    for (size_t k = 0; k < e.outstanding.size(); ++k) {
      const int64_t index = e.outstanding[k];
      if (index < 0 || index >= e.next_index ||
          (k > 0 && index <= e.outstanding[k - 1])) {
        return absl::DataLossError(
            absl::StrCat(where, ": outstanding index ", index, " is not in 0..",
                         e.next_index - 1,
                         " (below next_index) or not after the one before"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DataQueue> DataQueue::Restore(const DataQueueOptions& options,
                                             const DataQueueState& state,
                                             int64_t min_generation) {
  absl::StatusOr<DataQueue> q = Create(options);
  if (!q.ok()) return q.status();
  q->generation_ = std::max<int64_t>(min_generation - 1, 0);
  if (absl::Status s = q->Restore(state); !s.ok()) return s;
  return q;
}

absl::Status DataQueue::Restore(const DataQueueState& state) {
  if (absl::Status s = CheckSameOptions(options_, state); !s.ok()) return s;
  if (absl::Status s = CheckConsistent(state, chunks_per_epoch_); !s.ok()) {
    return s;
  }
  const int64_t generation = std::max(generation_, state.generation) + 1;
  if (generation > kMaxGeneration) {
    return absl::OutOfRangeError(absl::StrCat("data queue: generation ",
                                              generation,
                                              " would pass the most a "
                                              "lease id holds, ",
                                              kMaxGeneration));
  }
  std::map<int64_t, Epoch> epochs;
  std::set<std::pair<int64_t, int64_t>> queued;
  for (const DataQueueEpochState& es : state.epochs) {
    // The cached permutation when the epoch is in progress here too.
    Epoch e;
    auto cached = epochs_.find(es.epoch);
    e.permutation = cached != epochs_.end() ? cached->second.permutation
                                            : NewEpoch(es.epoch).permutation;
    e.next_index = es.next_index;
    for (int64_t index : es.outstanding) {
      e.outstanding[index] = Outstanding{};  // queued, no lease
      queued.emplace(es.epoch, index);
    }
    epochs.emplace(es.epoch, std::move(e));
  }
  epochs_ = std::move(epochs);
  queued_ = std::move(queued);
  generation_ = generation;
  next_sequence_ = state.next_lease_sequence;
  counters_ = state.counters;
  return absl::OkStatus();
}

std::string FormatLedgerLine(int worker, int64_t step, int64_t generation,
                             int64_t epoch, int64_t index,
                             absl::Span<const int64_t> samples) {
  return absl::StrCat("{\"epoch\":", epoch, ",\"index\":", index,
                      ",\"worker\":", worker, ",\"step\":", step,
                      ",\"generation\":", generation,
                      ",\"first\":", samples.empty() ? -1 : samples.front(),
                      ",\"count\":", samples.size(), "}");
}

}  // namespace ps
}  // namespace psgd
