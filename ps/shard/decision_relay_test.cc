// DecisionRelay (decision_relay.h): what one delivery carries, and what a
// shard's answer is believed to say.
#include "ps/shard/decision_relay.h"

#include <catch2/catch.hpp>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace psgd {
namespace ps {
namespace {

Decision Left(int worker) {
  Decision d;
  d.kind = Decision::Kind::kLeft;
  d.workers = {worker};
  d.push_ids = {0};
  return d;
}

// Every batch delivered to shard 1, by its seqs.
struct Recorder {
  absl::Mutex mu;
  std::vector<std::vector<int64_t>> batches;
  // Added to the last seq of the first answer.
  int64_t first_answer_beyond = 0;

  DecisionRelay::Deliver deliver() {
    return
        [this](int, int64_t, absl::Span<const Decision> decisions) -> int64_t {
          absl::MutexLock lock(&mu);
          std::vector<int64_t> seqs;
          for (const Decision& d : decisions) seqs.push_back(d.seq);
          batches.push_back(seqs);
          const int64_t last = decisions.back().seq;
          return batches.size() == 1 ? last + first_answer_beyond : last;
        };
  }
};

TEST_CASE("a delivery carries at most kMaxBatch decisions and kMaxBatchBytes") {
  // 600 small decisions: batches of 256, 256, 88 (or smaller, as they come).
  Recorder r;
  DecisionRelay relay(2, 1);
  for (int i = 0; i < 600; ++i) {
    Decision d = Left(i % 4);
    d.seq = i + 1;
    relay.Publish(d);
  }
  relay.set_deliver(r.deliver());
  REQUIRE(relay.AwaitDelivered(absl::Now() + absl::Seconds(30)));
  {
    absl::MutexLock lock(&r.mu);
    int64_t next = 1;
    for (const auto& b : r.batches) {
      CHECK(b.size() <= 256);
      for (int64_t seq : b) CHECK(seq == next++);
    }
    CHECK(next == 601);
    CHECK(r.batches.size() >= 3);  // 600 / 256, rounded up
    r.batches.clear();
  }
  // Decisions of a million sample ids each (over 8 MB by the bound, 11
  // bytes an id): one at a time, however many wait.
  Decision big = Left(0);
  big.chunks.push_back(DecidedChunk{0, {}, std::vector<int64_t>(1 << 20), 0});
  CHECK(DecisionBytesBound(big) > DecisionRelay::kMaxBatchBytes);
  for (int i = 0; i < 3; ++i) {
    big.seq = 601 + i;
    relay.Publish(big);
  }
  REQUIRE(relay.AwaitDelivered(absl::Now() + absl::Seconds(30)));
  absl::MutexLock lock(&r.mu);
  for (const auto& b : r.batches) CHECK(b.size() == 1);
  CHECK(r.batches.size() == 3);
}

TEST_CASE("a shard's answer beyond what it was sent is not believed") {
  // The first answer says 100 past the batch: were it believed, the relay
  // would count decisions 1-3 delivered with none applied. It sends them
  // again instead.
  Recorder r;
  r.first_answer_beyond = 100;
  DecisionRelay relay(2, 1);
  for (int i = 0; i < 3; ++i) {
    Decision d = Left(i);
    d.seq = i + 1;
    relay.Publish(d);
  }
  relay.set_deliver(r.deliver());
  REQUIRE(relay.AwaitDelivered(absl::Now() + absl::Seconds(30)));
  absl::MutexLock lock(&r.mu);
  REQUIRE(r.batches.size() == 2);
  CHECK(r.batches[0] == std::vector<int64_t>{1, 2, 3});
  CHECK(r.batches[1] == std::vector<int64_t>{1, 2, 3});
}

}  // namespace
}  // namespace ps
}  // namespace psgd
