#include "ps/shard/decision_relay.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {

int64_t DecisionBytesBound(const Decision& d) {
  // 11 bytes a varint field (tag and value), 16 a double or a
  // submessage's tag and length.
  int64_t n = 8 * 11 + 16;
  n += 11 * static_cast<int64_t>(d.workers.size() + d.push_ids.size());
  for (const DecidedChunk& c : d.chunks) {
    n += 16 + 6 * 11 + 11 * static_cast<int64_t>(c.samples.size());
  }
  return n;
}

DecisionRelay::DecisionRelay(int num_shards, int64_t generation)
    : num_shards_(num_shards),
      generation_(generation),
      acked_(std::max(num_shards, 1), 0) {
  for (int shard = 1; shard < num_shards_; ++shard) {
    senders_.emplace_back([this, shard] { Send(shard); });
  }
}

DecisionRelay::~DecisionRelay() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  for (std::thread& t : senders_) t.join();
}

void DecisionRelay::set_deliver(Deliver deliver) {
  MutexLock lock(&mu_);
  deliver_ = std::move(deliver);
  changed_.SignalAll();
}

void DecisionRelay::Publish(Decision decision) {
  MutexLock lock(&mu_);
  queue_.push_back(std::move(decision));
  changed_.SignalAll();
}

void DecisionRelay::Restart(int64_t generation) {
  MutexLock lock(&mu_);
  generation_ = generation;
  queue_.clear();
  first_seq_ = 1;
  std::fill(acked_.begin(), acked_.end(), 0);
  changed_.SignalAll();
}

bool DecisionRelay::AwaitDelivered(absl::Time deadline) {
  MutexLock lock(&mu_);
  return changed_.WaitUntil(&mu_, deadline, [this]() {
    mu_.AssertHeld();
    return queue_.empty() || stop_;
  });
}

bool DecisionRelay::AwaitBacklogAtMost(int64_t n, absl::Time deadline) {
  MutexLock lock(&mu_);
  return changed_.WaitUntil(&mu_, deadline, [&]() {
    mu_.AssertHeld();
    return static_cast<int64_t>(queue_.size()) <= n || stop_;
  });
}

int64_t DecisionRelay::backlog() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

void DecisionRelay::Send(int shard) {
  absl::Duration pause = absl::Milliseconds(50);
  std::string last_error;
  for (;;) {
    Deliver deliver;
    int64_t generation = 0;
    std::vector<Decision> batch;
    {
      MutexLock lock(&mu_);
      changed_.Wait(&mu_, [&]() {
        mu_.AssertHeld();
        return stop_ || (deliver_ != nullptr &&
                         acked_[shard] + 1 <
                             first_seq_ + static_cast<int64_t>(queue_.size()));
      });
      if (stop_) return;
      deliver = deliver_;
      generation = generation_;
      const int64_t from = std::max<int64_t>(acked_[shard] + 1, first_seq_);
      int64_t bytes = 0;
      for (int64_t seq = from;
           seq < first_seq_ + static_cast<int64_t>(queue_.size()) &&
           static_cast<int64_t>(batch.size()) < kMaxBatch;
           ++seq) {
        const Decision& d = queue_[seq - first_seq_];
        bytes += DecisionBytesBound(d);
        if (!batch.empty() && bytes > kMaxBatchBytes) break;
        batch.push_back(d);
      }
    }
    absl::StatusOr<int64_t> applied = deliver(shard, generation, batch);
    MutexLock lock(&mu_);
    if (generation != generation_) continue;  // restarted meanwhile
    // A shard's word is believed only up to what it was sent: an answer
    // beyond it (a shard that is not what it should be) would trim
    // decisions it never had.
    if (applied.ok() && *applied > batch.back().seq) {
      applied = absl::InternalError(absl::StrCat(
          "ps:", shard, " says it applied decision ", *applied,
          ", beyond the last one sent to it (", batch.back().seq, ")"));
    }
    // A shard shut down for good (CANCELLED) will take nothing any more:
    // what was sent counts as delivered.
    if (applied.ok() || absl::IsCancelled(applied.status())) {
      acked_[shard] =
          std::max(acked_[shard], applied.ok() ? *applied : batch.back().seq);
      pause = absl::Milliseconds(50);
      if (!last_error.empty()) {
        spdlog::info("decisions reach ps:{} again", shard);
        last_error.clear();
      }
      // Trim what every shard has.
      int64_t all = acked_[1];
      for (int s = 2; s < num_shards_; ++s) all = std::min(all, acked_[s]);
      while (!queue_.empty() && first_seq_ <= all) {
        queue_.pop_front();
        ++first_seq_;
      }
      changed_.SignalAll();
      continue;
    }
    const std::string error = applied.status().ToString();
    if (error != last_error) {
      spdlog::warn(
          "ps:{} did not take decisions {}..{} of generation {}: {} "
          "(trying again)",
          shard, batch.front().seq, batch.back().seq, generation, error);
      last_error = error;
    }
    changed_.WaitUntil(&mu_, absl::Now() + pause, [&]() {
      mu_.AssertHeld();
      return stop_ || generation != generation_;
    });
    pause = std::min(pause * 2, absl::Seconds(1));
  }
}

}  // namespace ps
}  // namespace psgd
