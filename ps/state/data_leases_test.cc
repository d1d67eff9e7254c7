// The data a shard hands out: a chunk is held until the push computed from
// it settles it (kept: done when its step is applied, with a ledger line
// naming its samples; dropped: back to the queue), a worker that leaves
// gives its chunks back, and the end of the data waits for the chunks still
// out with workers that compute them.
#include "ps/state/data_leases.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {
namespace {

// 8 samples in chunks of 2: 4 chunks an epoch.
DataLeases MakeLeases(int64_t epochs) {
  absl::StatusOr<DataQueue> q = DataQueue::Create({8, 2, 7});
  REQUIRE(q.ok());
  return DataLeases(*std::move(q), epochs, "shard 0");
}

std::set<int> NobodyPulls() { return {}; }

DataChunk MustLease(DataLeases& d, int worker) {
  absl::StatusOr<DataChunk> c = d.Lease(worker, nullptr, 0, NobodyPulls);
  REQUIRE(c.ok());
  return *c;
}

DataChunkRef Ref(const DataChunk& c) { return {c.epoch, c.index, c.lease}; }

TEST_CASE(
    "a kept chunk is done when its step is applied, and its ledger line names "
    "its samples") {
  DataLeases d = MakeLeases(0);
  const DataChunk c = MustLease(d, 1);
  const DataChunkRef ref = Ref(c);
  CHECK(d.Holds(1, &ref));
  CHECK_FALSE(d.Holds(2, &ref));
  CHECK(d.Holds(2, nullptr));  // no chunk: the worker reads its own data
  d.Settle(1, &ref, /*kept=*/true);
  CHECK_FALSE(d.Holds(1, &ref));
  CHECK(d.queue().counters().done == 0);  // in the pending step
  const std::vector<std::string> lines = d.Applied(/*step=*/5, /*ledger=*/true);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == FormatLedgerLine(1, 5, d.queue().generation(), c.epoch,
                                     c.index, c.samples));
  CHECK(d.queue().counters().done == 1);
  CHECK(d.Applied(6, true).empty());  // each chunk once
}

TEST_CASE("a dropped chunk goes back to the queue and to another worker") {
  DataLeases d = MakeLeases(0);
  const DataChunk c = MustLease(d, 1);
  const DataChunkRef ref = Ref(c);
  d.Settle(1, &ref, /*kept=*/false);
  CHECK_FALSE(d.Holds(1, &ref));
  CHECK(d.Applied(1, true).empty());
  const DataChunk again = MustLease(d, 2);
  CHECK(again.epoch == c.epoch);
  CHECK(again.index == c.index);
}

TEST_CASE(
    "a chunk in the step's aggregate cannot be given back; a refusal changes "
    "nothing") {
  DataLeases d = MakeLeases(0);
  const DataChunk c = MustLease(d, 1);
  const DataChunkRef ref = Ref(c);
  d.Settle(1, &ref, /*kept=*/true);
  absl::StatusOr<DataChunk> refused = d.Lease(1, &ref, 3, NobodyPulls);
  REQUIRE_FALSE(refused.ok());
  CHECK(LeaseRefusalOf(refused.status()) == LeaseRefusal::kNotYours);
  CHECK(std::string(refused.status().message()).find("in step 3's aggregate") !=
        std::string::npos);
  CHECK(d.queue().counters().leased == 1);
  CHECK(d.Applied(3, false).empty());  // done, with no line asked for
  CHECK(d.queue().counters().done == 1);
}

TEST_CASE("a chunk given back unused goes back to the queue first") {
  DataLeases d = MakeLeases(0);
  const DataChunk c = MustLease(d, 1);
  const DataChunkRef ref = Ref(c);
  absl::StatusOr<DataChunk> next = d.Lease(1, &ref, 0, NobodyPulls);
  REQUIRE(next.ok());
  // Returned chunks are leased before new ones, under a new lease.
  CHECK(next->index == c.index);
  CHECK(next->lease != c.lease);
  CHECK_FALSE(d.Holds(1, &ref));
  const DataChunkRef renewed = Ref(*next);
  CHECK(d.Holds(1, &renewed));
  CHECK(d.queue().counters().returned == 1);
}

TEST_CASE("a worker holds at most kMaxLeasesPerWorker chunks") {
  absl::StatusOr<DataQueue> q = DataQueue::Create({1000, 1, 1});
  REQUIRE(q.ok());
  DataLeases d(*std::move(q), 0, "shard 0");
  for (size_t i = 0; i < DataLeases::kMaxLeasesPerWorker; ++i) {
    REQUIRE(d.Lease(1, nullptr, 0, NobodyPulls).ok());
  }
  absl::StatusOr<DataChunk> refused = d.Lease(1, nullptr, 0, NobodyPulls);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(d.Lease(2, nullptr, 0, NobodyPulls).ok());  // others still lease
}

TEST_CASE("a worker that leaves gives its unsettled chunks back") {
  DataLeases d = MakeLeases(0);
  const DataChunk a = MustLease(d, 1);
  const DataChunk b = MustLease(d, 1);
  const DataChunkRef kept = Ref(a);
  d.Settle(1, &kept, /*kept=*/true);  // in the step: stays
  d.Gone(1);
  const DataChunkRef gone = Ref(b);
  CHECK_FALSE(d.Holds(1, &gone));
  CHECK(MustLease(d, 2).index == b.index);
  CHECK(d.Applied(1, false).size() == 0);
  CHECK(d.queue().counters().done == 1);
}

TEST_CASE(
    "the end of the data waits for chunks out with workers that compute them") {
  DataLeases d = MakeLeases(/*epochs=*/1);
  std::vector<std::pair<int, DataChunk>> chunks;
  for (int i = 0; i < 4; ++i) {
    const int worker = 1 + i % 2;
    chunks.push_back({worker, MustLease(d, worker)});
  }
  // Worker 1 holds unpushed chunks of its own: it pushes them first.
  absl::StatusOr<DataChunk> own = d.Lease(1, nullptr, 0, NobodyPulls);
  CHECK(own.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(std::string(own.status().message()).find("holds 2 chunk(s)") !=
        std::string::npos);
  // Worker 3 holds none; workers 1 and 2 compute theirs: wait.
  absl::StatusOr<DataChunk> wait = d.Lease(3, nullptr, 0, NobodyPulls);
  CHECK(wait.status().code() == absl::StatusCode::kUnavailable);
  CHECK(LeaseRefusalOf(wait.status()) == LeaseRefusal::kNotEnded);
  CHECK(std::string(wait.status().message()).find("(worker 1)") !=
        std::string::npos);
  // Workers waiting for a step push their chunks with the step: not awaited.
  absl::StatusOr<DataChunk> ended = d.Lease(3, nullptr, 0, [] {
    return std::set<int>{1, 2};
  });
  CHECK(ended.status().code() == absl::StatusCode::kOutOfRange);
  // Chunks in the pending step are not awaited either.
  for (const auto& [worker, c] : chunks) {
    const DataChunkRef ref = Ref(c);
    d.Settle(worker, &ref, /*kept=*/true);
  }
  CHECK(d.Lease(3, nullptr, 0, NobodyPulls).status().code() ==
        absl::StatusCode::kOutOfRange);
}

TEST_CASE("Install replaces the queue with nothing out") {
  DataLeases d = MakeLeases(0);
  const DataChunk c = MustLease(d, 1);
  const DataChunkRef ref = Ref(c);
  d.Settle(1, &ref, /*kept=*/true);
  const DataQueueState saved = d.queue().Snapshot();
  absl::StatusOr<DataQueue> restored =
      DataQueue::Restore({8, 2, 7}, saved, d.queue().generation() + 1);
  REQUIRE(restored.ok());
  d.Install(*std::move(restored));
  CHECK(d.Applied(2, true).empty());  // the kept chunk is not in its step
  CHECK_FALSE(d.Holds(1, &ref));
  CHECK(MustLease(d, 2).index == c.index);  // its gradient was not saved
}

}  // namespace
}  // namespace ps
}  // namespace psgd
