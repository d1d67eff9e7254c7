// ParameterShard's data queue (docs/PS.md, "The servers hand out the
// data"): chunks bound to the pushes they were computed for (done when the
// gradient is applied, back in the queue when it is dropped as surplus or
// stale), given back by a leave, an expired lease or a new incarnation,
// the queue and its ledger put back with the weights by a restore, and the
// refusals, which change nothing. The ledger is read back and every
// sample counted.
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "ps/shard/shard.h"
#include "ps/testing/checkpoint_test_util.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::FreshDir;
using testing::MakeShard;
using testing::TwoVariables;

constexpr int64_t kSamples = 20;
constexpr int64_t kChunk = 3;  // 7 chunks an epoch, the last of 2

ShardOptions DataOptions(int n, int m, const std::string& dir = "",
                         int every_steps = 0) {
  ShardOptions o;
  o.replicas_to_aggregate = n;
  o.total_num_replicas = m;
  o.data_queue_on = true;
  o.data_queue = {kSamples, kChunk, /*seed=*/7};
  if (!dir.empty()) {
    o.checkpoint.dir = dir + "/ckpt";
    o.checkpoint.every_steps = every_steps;
    o.ledger_file = dir + "/ledger.jsonl";
  }
  return o;
}

DataChunkRef Ref(const DataChunk& c) { return {c.epoch, c.index, c.lease}; }

absl::StatusOr<PushReply> PushChunk(ParameterShard& shard, int worker,
                                    int64_t step, const DataChunk& chunk) {
  const DataChunkRef ref = Ref(chunk);
  return shard.Push(worker, step, testing::ExactGradient(worker, step).Bytes(),
                    0, &ref);
}

// Each sample's count per epoch in the ledger: the lines' chunks expanded
// with the epoch's permutation.
std::map<int64_t, std::vector<int>> LedgerCounts(const std::string& file) {
  std::map<int64_t, std::vector<int>> counts;
  std::ifstream in(file);
  std::string line;
  const std::regex field("\"(epoch|index|first|count)\":(-?[0-9]+)");
  while (std::getline(in, line)) {
    std::map<std::string, int64_t> f;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), field);
         it != std::sregex_iterator(); ++it) {
      f[(*it)[1]] = std::stoll((*it)[2]);
    }
    REQUIRE(f.size() == 4);
    const std::vector<int64_t> perm = EpochPermutation(kSamples, 7, f["epoch"]);
    std::vector<int>& c = counts[f["epoch"]];
    c.resize(kSamples);
    const int64_t begin = f["index"] * kChunk;
    CHECK(perm[begin] == f["first"]);
    for (int64_t p = begin; p < begin + f["count"]; ++p) ++c[perm[p]];
  }
  return counts;
}

TEST_CASE("sync with a backup worker: each sample applied once an epoch") {
  const std::string dir = FreshDir("data_backup");
  auto shard = MakeShard(DataOptions(/*n=*/2, /*m=*/3, dir));
  // 3 workers, N = 2: each step one gradient is surplus, and its chunk goes
  // back to the queue to be leased again.
  int64_t surplus = 0;
  for (int step = 0; step < 12; ++step) {
    std::vector<DataChunk> chunks;
    for (int w = 0; w < 3; ++w) {
      absl::StatusOr<DataChunk> c = shard->LeaseData(w);
      INFO(c.status().ToString());
      REQUIRE(c.ok());
      chunks.push_back(*c);
    }
    for (int w = 0; w < 3; ++w) {
      absl::StatusOr<PushReply> r = PushChunk(*shard, w, step, chunks[w]);
      REQUIRE(r.ok());
      surplus += r->outcome == PushOutcome::kDroppedSurplus;
    }
  }
  CHECK(surplus == 12);
  const ShardStatus status = shard->Status();
  CHECK(status.data_queue);
  CHECK(status.data_counters.leased == 36);
  CHECK(status.data_counters.done == 24);
  CHECK(status.data_counters.returned == 12);
  CHECK(status.data_counters.epochs_completed == 3);
  // 24 chunks applied: 3 whole epochs of 7 and 3 chunks of the fourth.
  const DataQueuePosition p = *shard->DataPosition();
  CHECK(p.epoch == 3);
  CHECK(p.chunks_done == 3);
  const auto counts = LedgerCounts(dir + "/ledger.jsonl");
  REQUIRE(counts.size() == 4);
  for (int64_t e = 0; e < 3; ++e) {
    INFO("epoch " << e);
    CHECK(counts.at(e) == std::vector<int>(kSamples, 1));
  }
  int fourth = 0;
  for (int n : counts.at(3)) {
    CHECK(n <= 1);
    fourth += n;
  }
  CHECK(fourth == 3 * kChunk);
}

TEST_CASE("a chunk whose gradient is stale goes back; async applies each") {
  ShardOptions o = testing::AsyncSgdOptions(2);
  o.data_queue_on = true;
  o.data_queue = {kSamples, kChunk, 7};
  o.max_push_staleness = 0;
  auto shard = MakeShard(o);
  const DataChunk a = *shard->LeaseData(0);
  const DataChunk b = *shard->LeaseData(1);
  REQUIRE(PushChunk(*shard, 0, 0, a).ok());
  // Worker 1's gradient of step 0 is one step stale: refused, its chunk
  // goes back and is the next one leased.
  CHECK_FALSE(PushChunk(*shard, 1, 0, b).ok());
  const DataChunk again = *shard->LeaseData(0);
  CHECK(again.epoch == b.epoch);
  CHECK(again.index == b.index);
  CHECK(again.samples == b.samples);
  CHECK(a.index != b.index);
  CHECK(shard->DataPosition()->chunks_done == 1);
}

TEST_CASE("a push refused as a second one for its step gives its chunk back") {
  auto shard = MakeShard(DataOptions(/*n=*/2, /*m=*/3));
  const DataChunk a = *shard->LeaseData(0);
  const DataChunk b = *shard->LeaseData(1);
  const DataChunk c = *shard->LeaseData(2);
  REQUIRE(PushChunk(*shard, 0, 0, a)->outcome == PushOutcome::kAggregated);
  REQUIRE(PushChunk(*shard, 1, 0, b)->outcome == PushOutcome::kApplied);
  REQUIRE(PushChunk(*shard, 2, 0, c)->outcome == PushOutcome::kDroppedSurplus);
  // Worker 0 leases the surplus gradient's chunk (returned chunks first)
  // and pushes it for step 0 again: refused, and the worker goes on to
  // another chunk without giving this one back.
  const DataChunk d = *shard->LeaseData(0);
  REQUIRE(d.epoch == c.epoch);
  REQUIRE(d.index == c.index);
  const absl::StatusOr<PushReply> again = PushChunk(*shard, 0, 0, d);
  REQUIRE_FALSE(again.ok());
  CHECK(PushRefusalOf(again.status()) == PushRefusal::kAlreadyPushed);
  // The chunk is back in the queue, not out with worker 0, and the next
  // lease (worker 1's) is this chunk.
  const DataQueuePosition p = *shard->DataPosition();
  CHECK(p.chunks_out == 0);
  CHECK(p.chunks_queued == 1);
  const DataChunk next = *shard->LeaseData(1);
  CHECK(next.epoch == d.epoch);
  CHECK(next.index == d.index);
  CHECK(next.samples == c.samples);
  // Worker 0 pushing it again, for the step it may push to: it is worker
  // 1's now; the gradient is dropped and worker 1 keeps the chunk.
  const absl::StatusOr<PushReply> late = PushChunk(*shard, 0, 1, d);
  REQUIRE(late.ok());
  CHECK(late->outcome == PushOutcome::kDroppedStale);
  CHECK(shard->DataPosition()->chunks_out == 1);
  CHECK(shard->DataPosition()->chunks_queued == 0);
}

TEST_CASE("a leave, an expired lease and a new incarnation give chunks back") {
  ShardOptions o = DataOptions(1, 2);
  o.worker_lease = absl::Seconds(30);
  auto shard = MakeShard(o);
  const DataChunk a = *shard->LeaseData(0);
  REQUIRE(shard->Leave(0).ok());
  CHECK(shard->DataPosition()->chunks_queued == 1);
  REQUIRE(shard->Join(0).ok());
  CHECK(shard->LeaseData(0)->index == a.index);  // the one given back
  // Worker 1 stops answering: its lease expires.
  const DataChunk b = *shard->LeaseData(1);
  CHECK(shard->ExpireWorkers(absl::Now() + absl::Hours(1)) ==
        std::vector<int>{0, 1});
  CHECK(shard->DataPosition()->chunks_queued == 2);
  REQUIRE(shard->Join(1, /*incarnation=*/5).ok());
  REQUIRE(shard->Join(0).ok());
  const DataChunk c = *shard->LeaseData(1);
  CHECK(c.index == a.index);
  // Worker 1 started again as another process: what it held goes back.
  REQUIRE(shard->Join(1, /*incarnation=*/6).ok());
  CHECK(shard->DataPosition()->chunks_queued == 2);
  CHECK(b.index != a.index);
}

// Sync, N = M = 2, a run of one epoch: steps 0..2 train chunks 0..5 and
// worker 1 leases the last one, 0/6. Worker 0 finds nothing to hand out.
std::unique_ptr<ParameterShard> LastEpochWithChunkOut(const ShardOptions& o,
                                                      DataChunk* last) {
  auto shard = MakeShard(o);
  for (int step = 0; step < 3; ++step) {
    const DataChunk a = *shard->LeaseData(0);
    const DataChunk b = *shard->LeaseData(1);
    REQUIRE(PushChunk(*shard, 0, step, a).ok());
    REQUIRE(PushChunk(*shard, 1, step, b).ok());
  }
  absl::StatusOr<DataChunk> c = shard->LeaseData(1);
  REQUIRE(c.ok());
  REQUIRE((c->epoch == 0 && c->index == 6));
  *last = *c;
  return shard;
}

// Worker 0's lease while 0/6 is out with worker 1: UNAVAILABLE naming it.
void CheckWaitsForLastChunk(ParameterShard& shard) {
  const absl::Status s = shard.LeaseData(0).status();
  INFO(s.ToString());
  CHECK(absl::IsUnavailable(s));
  CHECK(LeaseRefusalOf(s) == LeaseRefusal::kNotEnded);
  CHECK_THAT(std::string(s.message()), Catch::Contains(kDataNotEnded) &&
                                           Catch::Contains("0/6 (worker 1)"));
}

// Worker 0 gets the last chunk back, trains it, and only then the data ends.
void CheckTrainsLastChunk(ParameterShard& shard, const DataChunk& last,
                          const std::string& ledger) {
  absl::StatusOr<DataChunk> again = shard.LeaseData(0);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK((again->epoch == 0 && again->index == 6));
  CHECK(again->samples == last.samples);
  absl::StatusOr<PushReply> r = PushChunk(shard, 0, 3, *again);
  REQUIRE(r.ok());
  CHECK(r->outcome == PushOutcome::kApplied);  // N follows the live workers
  CHECK(absl::IsOutOfRange(shard.LeaseData(0).status()));
  CHECK(LedgerCounts(ledger).at(0) == std::vector<int>(kSamples, 1));
}

TEST_CASE("the last epoch's chunk of a worker that leaves is trained") {
  const std::string dir = FreshDir("data_last_leave");
  ShardOptions o = DataOptions(2, 2, dir);
  o.data_epochs = 1;
  DataChunk last;
  auto shard = LastEpochWithChunkOut(o, &last);
  CheckWaitsForLastChunk(*shard);
  CheckWaitsForLastChunk(*shard);  // a refusal changes nothing
  REQUIRE(shard->Leave(1).ok());
  CheckTrainsLastChunk(*shard, last, dir + "/ledger.jsonl");
}

TEST_CASE(
    "the last epoch's chunk of a worker whose lease runs out is trained; "
    "the worker waiting for it keeps its lease") {
  const std::string dir = FreshDir("data_last_expire");
  ShardOptions o = DataOptions(2, 2, dir);
  o.data_epochs = 1;
  o.worker_lease = absl::Seconds(2);
  DataChunk last;
  auto shard = LastEpochWithChunkOut(o, &last);
  // Worker 1 is silent (killed) for 1.2 s; worker 0 asks every 50 ms.
  const absl::Time until = absl::Now() + absl::Milliseconds(1200);
  while (absl::Now() < until) {
    CheckWaitsForLastChunk(*shard);
    absl::SleepFor(absl::Milliseconds(50));
  }
  // One second on: worker 1 was last seen more than 2 s before, worker 0
  // less.
  CHECK(shard->ExpireWorkers(absl::Now() + absl::Seconds(1)) ==
        std::vector<int>{1});
  CheckTrainsLastChunk(*shard, last, dir + "/ledger.jsonl");
}

TEST_CASE(
    "the data ends with the last epoch's chunks in the step's aggregate or "
    "with a worker waiting for the step") {
  const std::string dir = FreshDir("data_last_pending");
  ShardOptions o = DataOptions(2, 2, dir);
  o.data_epochs = 1;
  DataChunk last;
  auto shard = LastEpochWithChunkOut(o, &last);
  CheckWaitsForLastChunk(*shard);
  // Worker 1 pushes it: it waits in the step's aggregate for worker 0, whose
  // leave completes the step.
  REQUIRE(PushChunk(*shard, 1, 3, last).ok());
  CHECK(absl::IsOutOfRange(shard->LeaseData(0).status()));
  REQUIRE(shard->Leave(0).ok());
  CHECK(LedgerCounts(dir + "/ledger.jsonl").at(0) ==
        std::vector<int>(kSamples, 1));

  // A worker that holds chunks of its own not pushed (a DataLoader's
  // prefetch) is told the data ended: it pushes them first.
  const std::string dir2 = FreshDir("data_last_own");
  ShardOptions o2 = DataOptions(2, 2, dir2);
  o2.data_epochs = 1;
  auto own = LastEpochWithChunkOut(o2, &last);
  CHECK(absl::IsOutOfRange(own->LeaseData(1).status()));
  // Worker 1 holds 0/6 (leased ahead) and waits in a pull for a step that
  // may need worker 0's push or leave: worker 0 does not wait for it.
  std::atomic<bool> pulled{false};
  const uint64_t ticket = own->PullAsync(
      4, 1, [&](absl::StatusOr<ParameterShard::Snapshot>) { pulled = true; });
  CHECK(ticket != 0);
  CHECK(absl::IsOutOfRange(own->LeaseData(0).status()));
  CHECK(own->CancelPull(ticket));
  CheckWaitsForLastChunk(*own);
  CHECK_FALSE(pulled);
}

TEST_CASE("a restore puts the queue and the ledger back with the weights") {
  const std::string dir = FreshDir("data_restore");
  const ShardOptions o = DataOptions(1, 1, dir, /*every_steps=*/4);
  std::vector<DataChunk> leased;
  {
    auto shard = MakeShard(o);
    for (int step = 0; step < 6; ++step) {
      leased.push_back(*shard->LeaseData(0));
      REQUIRE(PushChunk(*shard, 0, step, leased.back()).ok());
    }
    leased.push_back(*shard->LeaseData(0));  // out when it "crashes"
    shard->FlushCheckpoints();
    CHECK(LedgerCounts(dir + "/ledger.jsonl").at(0) != std::vector<int>());
  }
  // A new process restores step 4: the chunks of steps 4 and 5 and the one
  // out are leased again, in order, and the ledger holds 4 chunks.
  auto restarted = ParameterShard::Create(o);
  REQUIRE(restarted.ok());
  ParameterShard& shard = **restarted;
  REQUIRE(shard.Rollback(4, 2).ok());
  REQUIRE(shard.Join(0).ok());
  CHECK(shard.DataPosition()->chunks_done == 4);
  int lines = 0;
  const auto counts = LedgerCounts(dir + "/ledger.jsonl");
  for (int n : counts.at(0)) lines += n;
  CHECK(lines == 4 * kChunk);
  std::vector<DataChunk> again;
  for (int i = 4; i < 7; ++i) {
    absl::StatusOr<DataChunk> c = shard.LeaseData(0);
    REQUIRE(c.ok());
    CHECK(c->index == leased[i].index);
    CHECK(c->samples == leased[i].samples);
    again.push_back(*c);
  }
  // A lease of the crashed process's is void.
  DataChunkRef old{leased[6].epoch, leased[6].index, leased[6].lease};
  absl::StatusOr<DataChunk> refused = shard.LeaseData(0, 0, &old);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("generation"));
  // A gradient of the crashed process's chunk is dropped: its samples are
  // in the queue again.
  absl::StatusOr<PushReply> old_push = PushChunk(shard, 0, 4, leased[6]);
  REQUIRE(old_push.ok());
  CHECK(old_push->outcome == PushOutcome::kDroppedStale);
  CHECK_THAT(old_push->reason, Catch::Contains("no longer the worker's"));
  // Steps 4 to 6 again, then the epoch ends whole in the ledger.
  for (int step = 4; step < 7; ++step) {
    REQUIRE(PushChunk(shard, 0, step, again[step - 4]).ok());
  }
  CHECK(LedgerCounts(dir + "/ledger.jsonl").at(0) ==
        std::vector<int>(kSamples, 1));
}

TEST_CASE("refusals of data leases change nothing") {
  ShardOptions plain;
  plain.total_num_replicas = 2;
  auto no_queue = MakeShard(plain);
  CHECK(absl::IsFailedPrecondition(no_queue->LeaseData(0).status()));
  CHECK(LeaseRefusalOf(no_queue->LeaseData(0).status()) == LeaseRefusal::kNone);

  ShardOptions o = DataOptions(2, 2);
  o.data_epochs = 1;
  auto shard = MakeShard(o);
  REQUIRE(shard->Leave(1).ok());
  CHECK(absl::IsFailedPrecondition(shard->LeaseData(1).status()));
  CHECK(absl::IsInvalidArgument(shard->LeaseData(7).status()));
  REQUIRE(shard->Join(1).ok());
  const DataChunk a = *shard->LeaseData(0);
  const DataChunkRef ref{a.epoch, a.index, a.lease};
  // Given back by another worker, then twice: not theirs (the worker drops
  // it and leases again, WorkerSession::LeaseData).
  CHECK(LeaseRefusalOf(shard->LeaseData(1, 0, &ref).status()) ==
        LeaseRefusal::kNotYours);
  const DataChunk b = *shard->LeaseData(0, 0, &ref);
  CHECK(b.index == a.index);  // given back, then leased again
  const DataQueuePosition before = *shard->DataPosition();
  const absl::Status twice = shard->LeaseData(0, 0, &ref).status();
  CHECK(absl::IsFailedPrecondition(twice));
  CHECK(LeaseRefusalOf(twice) == LeaseRefusal::kNotYours);
  // Its gradient in the aggregate: it cannot be given back.
  REQUIRE(PushChunk(*shard, 0, 0, b).ok());
  const DataChunkRef in_step{b.epoch, b.index, b.lease};
  const absl::Status kept = shard->LeaseData(0, 0, &in_step).status();
  CHECK(absl::IsFailedPrecondition(kept));
  CHECK(LeaseRefusalOf(kept) == LeaseRefusal::kNotYours);
  const DataQueuePosition after = *shard->DataPosition();
  CHECK(after.chunks_out == before.chunks_out);
  CHECK(after.chunks_queued == before.chunks_queued);
  // Another generation.
  CHECK(absl::IsAborted(shard->LeaseData(0, 9).status()));
  // One epoch: once its 7 chunks are out, the data has ended.
  for (int i = 0; i < 6; ++i) REQUIRE(shard->LeaseData(1).ok());
  CHECK(absl::IsOutOfRange(shard->LeaseData(1).status()));
}

TEST_CASE("a worker holds at most kMaxLeasesPerWorker chunks at once") {
  ShardOptions o = DataOptions(1, 2);
  o.data_queue = {1000, 1, /*seed=*/7};  // 1000 chunks an epoch
  auto shard = MakeShard(o);
  std::vector<DataChunk> held;
  for (size_t i = 0; i < DataLeases::kMaxLeasesPerWorker; ++i) {
    absl::StatusOr<DataChunk> c = shard->LeaseData(0);
    REQUIRE(c.ok());
    held.push_back(*c);
  }
  const DataQueuePosition before = *shard->DataPosition();
  absl::Status s = shard->LeaseData(0).status();
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(LeaseRefusalOf(s) == LeaseRefusal::kNone);  // an error, no refusal
  CHECK(s.message().find("holds 64 chunks") != absl::string_view::npos);
  CHECK(shard->DataPosition()->chunks_out == before.chunks_out);
  // The other worker is not held back; one given back makes room.
  CHECK(shard->LeaseData(1).ok());
  const DataChunkRef back = Ref(held.back());
  CHECK(shard->LeaseData(0, 0, &back).ok());
}

}  // namespace
}  // namespace ps
}  // namespace psgd
