// The data queue's rules: each sample once per epoch however leases are
// done, returned or lost (a randomized property test with fixed seeds),
// returned chunks first, refusals that change nothing, snapshots and
// restores that void old leases, and the golden permutation that
// scripts/ledger_check_test.py checks too.
#include "ps/state/data_queue.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psgd {
namespace ps {
namespace {

// The golden values; scripts/ledger_check_test.py has the same.
constexpr uint64_t kGoldenSeed = 0x0123456789ABCDEF;
const std::vector<int64_t> kGoldenEpoch3 = {19, 8, 16, 0, 17, 6, 14, 4, 12, 18,
                                            7,  9, 13, 2, 15, 1, 10, 3, 11, 5};
const std::vector<int64_t> kGoldenEpoch4 = {
    16, 15, 7, 1, 18, 6, 19, 4, 12, 0, 10, 17, 13, 14, 8, 9, 2, 11, 3, 5};

DataQueue MakeQueue(int64_t num_samples, int64_t chunk_size, uint64_t seed) {
  absl::StatusOr<DataQueue> q =
      DataQueue::Create({num_samples, chunk_size, seed});
  REQUIRE(q.ok());
  return *std::move(q);
}

DataChunk MustLease(DataQueue& q, int worker) {
  absl::StatusOr<DataChunk> c = q.Lease(worker);
  REQUIRE(c.ok());
  return *std::move(c);
}

// Everything a refusal must leave as it was: the snapshot, the counters and
// the position (which tells leased chunks from queued ones).
std::string Describe(const DataQueue& q) {
  const DataQueueState s = q.Snapshot();
  std::string out = absl::StrCat("generation ", s.generation, " next ",
                                 s.next_lease_sequence, ";");
  for (const DataQueueEpochState& e : s.epochs) {
    absl::StrAppend(&out, " epoch ", e.epoch, " next_index ", e.next_index,
                    " outstanding [", absl::StrJoin(e.outstanding, ","), "];");
  }
  const DataQueueCounters& c = q.counters();
  const DataQueuePosition p = q.Position();
  absl::StrAppend(&out, " leased ", c.leased, " done ", c.done, " returned ",
                  c.returned, " epochs_completed ", c.epochs_completed,
                  "; position ", p.epoch, " ", p.chunks_done, "/",
                  p.chunks_in_epoch, " out ", p.chunks_out, " queued ",
                  p.chunks_queued);
  return out;
}

TEST_CASE("options are validated, naming the field") {
  CHECK(ValidateDataQueueOptions({10, 3, 0}).ok());
  absl::Status s = ValidateDataQueueOptions({0, 3, 0});
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("num_samples 0 is not in 1.."));
  s = ValidateDataQueueOptions({kMaxDataQueueSamples + 1, 3, 0});
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("num_samples"));
  s = ValidateDataQueueOptions({10, -2, 0});
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("chunk_size -2 is not positive"));
  CHECK(DataQueue::Create({10, 0, 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("the golden values are the Python script's") {
  SplitMix64 zero(0);  // Vigna's splitmix64.c from state 0
  CHECK(zero.Next() == 0xE220A8397B1DCDAFULL);
  CHECK(zero.Next() == 0x6E789E6AA1B965F4ULL);
  CHECK(zero.Next() == 0x06C45D188009454FULL);
  // 2^64 mod (2^63 + 1) = 2^63 - 1: about half the draws are rejected.
  SplitMix64 seven(7);
  std::vector<uint64_t> below;
  for (int i = 0; i < 6; ++i) below.push_back(seven.Below((1ULL << 63) + 1));
  CHECK(below ==
        std::vector<uint64_t>{7392729709960833537ULL, 1529793891446696394ULL,
                              8483179396677329707ULL, 7711100304988943181ULL,
                              6849861940886463535ULL, 6714756187199313381ULL});
  CHECK(EpochPermutation(20, kGoldenSeed, 3) == kGoldenEpoch3);
  CHECK(EpochPermutation(20, kGoldenSeed, 4) == kGoldenEpoch4);
  const std::vector<int64_t> p = EpochPermutation(1000, ~uint64_t{0}, 12345);
  CHECK(std::vector<int64_t>(p.begin(), p.begin() + 5) ==
        std::vector<int64_t>{169, 488, 162, 940, 725});
  int64_t weighted = 0;
  for (int64_t i = 0; i < 1000; ++i) weighted += i * p[i];
  CHECK(weighted == 249038142);
  // Chunk 2 of epoch 3 with chunk_size 6: positions 12..17.
  const std::vector<int64_t> chunk(kGoldenEpoch3.begin() + 12,
                                   kGoldenEpoch3.begin() + 18);
  CHECK(FormatLedgerLine(3, 17, 1, 3, 2, chunk) ==
        "{\"epoch\":3,\"index\":2,\"worker\":3,\"step\":17,\"generation\":1,"
        "\"first\":13,\"count\":6}");
}

TEST_CASE("permutations are permutations, different per epoch and seed") {
  for (int64_t n : {1, 2, 7, 64, 1000}) {
    for (int64_t e = 0; e < 3; ++e) {
      std::vector<int64_t> p = EpochPermutation(n, 99, e);
      std::sort(p.begin(), p.end());
      for (int64_t i = 0; i < n; ++i) REQUIRE(p[i] == i);
    }
  }
  CHECK(EpochPermutation(100, 1, 0) != EpochPermutation(100, 1, 1));
  CHECK(EpochPermutation(100, 1, 0) != EpochPermutation(100, 2, 0));
}

TEST_CASE("an epoch is its permutation in chunks, the last one shorter") {
  DataQueue q = MakeQueue(20, 6, kGoldenSeed);
  REQUIRE(q.ChunksPerEpoch() == 4);
  // Epochs 0..2 first, to reach the golden epoch 3.
  for (int i = 0; i < 12; ++i) {
    const DataChunk c = MustLease(q, 0);
    REQUIRE(q.Done(0, c.epoch, c.index, c.lease).ok());
  }
  CHECK(q.counters().epochs_completed == 3);
  uint64_t last_lease = 0;
  for (int64_t i = 0; i < 4; ++i) {
    const DataChunk c = MustLease(q, i);
    CHECK(c.epoch == 3);
    CHECK(c.index == i);
    CHECK(c.generation == 0);
    CHECK(c.lease > last_lease);
    last_lease = c.lease;
    const std::vector<int64_t> want(
        kGoldenEpoch3.begin() + 6 * i,
        kGoldenEpoch3.begin() + std::min<int64_t>(20, 6 * i + 6));
    CHECK(c.samples == want);
  }
  const DataQueuePosition p = q.Position();
  CHECK(p.epoch == 3);
  CHECK(p.chunks_done == 0);
  CHECK(p.chunks_in_epoch == 4);
  CHECK(p.chunks_out == 4);
  // The epoch's chunks are all out: the next lease begins epoch 4.
  const DataChunk c = MustLease(q, 9);
  CHECK(c.epoch == 4);
  CHECK(c.index == 0);
  CHECK(c.samples ==
        std::vector<int64_t>(kGoldenEpoch4.begin(), kGoldenEpoch4.begin() + 6));
}

TEST_CASE("returned chunks are leased first, lowest (epoch, index) first") {
  DataQueue q = MakeQueue(10, 5, 1);    // 2 chunks an epoch
  const DataChunk a = MustLease(q, 0);  // (0, 0)
  const DataChunk b = MustLease(q, 1);  // (0, 1)
  const DataChunk c = MustLease(q, 2);  // (1, 0): epoch 1 begins
  REQUIRE(c.epoch == 1);
  REQUIRE(q.Return(2, c.epoch, c.index, c.lease).ok());
  REQUIRE(q.Return(1, b.epoch, b.index, b.lease).ok());
  CHECK(q.Position().chunks_queued == 2);
  // Epoch 0's chunk before epoch 1's, though returned after it.
  const DataChunk b2 = MustLease(q, 3);
  CHECK((b2.epoch == 0 && b2.index == 1));
  CHECK(b2.samples == b.samples);
  CHECK(b2.lease > c.lease);
  const DataChunk c2 = MustLease(q, 3);
  CHECK((c2.epoch == 1 && c2.index == 0));
  const DataChunk d = MustLease(q, 3);  // nothing queued: never leased
  CHECK((d.epoch == 1 && d.index == 1));
  // Epoch 0 completes though epoch 1 is current.
  REQUIRE(q.Done(0, a.epoch, a.index, a.lease).ok());
  REQUIRE(q.Done(3, b2.epoch, b2.index, b2.lease).ok());
  CHECK(q.counters().epochs_completed == 1);
  CHECK(q.Position().epoch == 1);
  CHECK(q.Snapshot().epochs.size() == 1);
}

TEST_CASE(
    "a chunk given back goes to another worker while the epoch has "
    "fresh ones") {
  DataQueue q = MakeQueue(100, 10, 5);  // 10 chunks an epoch
  // Worker 2, a backup that is always the last of its step, gives its
  // chunk back at every step: it gets a fresh chunk, and worker 0 takes
  // (and completes) the one it gave.
  DataChunk held = MustLease(q, 2);
  for (int step = 0; step < 3; ++step) {
    const DataChunk given = held;
    REQUIRE(q.Return(2, given.epoch, given.index, given.lease, true).ok());
    held = MustLease(q, 2);
    CHECK(!(held.epoch == given.epoch && held.index == given.index));
    const DataChunk other = MustLease(q, 0);
    CHECK((other.epoch == given.epoch && other.index == given.index));
    REQUIRE(q.Done(0, other.epoch, other.index, other.lease).ok());
  }
  CHECK(q.counters().done == 3);
  CHECK(q.counters().returned == 3);
}

TEST_CASE(
    "a worker takes back the chunk it gave when the epoch has no "
    "fresh ones") {
  DataQueue q = MakeQueue(10, 5, 1);  // 2 chunks an epoch
  const DataChunk a = MustLease(q, 0);
  const DataChunk b = MustLease(q, 0);
  REQUIRE(q.Return(0, b.epoch, b.index, b.lease, true).ok());
  const DataChunk b2 = MustLease(q, 0);  // epoch 0 has no fresh chunk
  CHECK((b2.epoch == 0 && b2.index == 1));
  REQUIRE(q.Done(0, a.epoch, a.index, a.lease).ok());
  REQUIRE(q.Done(0, b2.epoch, b2.index, b2.lease).ok());
  CHECK(q.counters().epochs_completed == 1);
  // A single worker gets its returned chunk at the end of the epoch.
  DataQueue one = MakeQueue(30, 10, 1);  // 3 chunks an epoch
  const DataChunk x = MustLease(one, 0);
  REQUIRE(one.Return(0, x.epoch, x.index, x.lease, true).ok());
  const DataChunk y = MustLease(one, 0);
  CHECK((y.epoch == 0 && y.index == 1));
  REQUIRE(one.Done(0, y.epoch, y.index, y.lease).ok());
  const DataChunk z = MustLease(one, 0);
  CHECK((z.epoch == 0 && z.index == 2));
  REQUIRE(one.Done(0, z.epoch, z.index, z.lease).ok());
  const DataChunk x2 = MustLease(one, 0);
  CHECK((x2.epoch == 0 && x2.index == 0));
  REQUIRE(one.Done(0, x2.epoch, x2.index, x2.lease).ok());
  CHECK(one.counters().epochs_completed == 1);
}

TEST_CASE("a worker gone returns every chunk it holds, and only those") {
  DataQueue q = MakeQueue(100, 10, 5);
  const DataChunk a = MustLease(q, 7);
  const DataChunk b = MustLease(q, 8);
  const DataChunk c = MustLease(q, 7);
  absl::StatusOr<int64_t> n = q.WorkerGone(7);
  REQUIRE(n.ok());
  CHECK(*n == 2);
  CHECK(q.counters().returned == 2);
  CHECK(*q.WorkerGone(7) == 0);
  CHECK(q.WorkerGone(-1).status().code() == absl::StatusCode::kInvalidArgument);
  // Its leases are refused now; worker 8's stands.
  CHECK(q.Done(7, a.epoch, a.index, a.lease).code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(q.Done(8, b.epoch, b.index, b.lease).ok());
  CHECK(MustLease(q, 9).index == a.index);
  CHECK(MustLease(q, 9).index == c.index);
  CHECK(MustLease(q, 9).index == 3);
}

TEST_CASE(
    "a run's last epoch ends when its chunks are done, not when the last "
    "is leased") {
  DataQueue q = MakeQueue(30, 10, 3);  // 3 chunks an epoch; a run of 2
  for (int i = 0; i < 3; ++i) {
    const DataChunk c = MustLease(q, 0);
    REQUIRE(q.Done(0, c.epoch, c.index, c.lease).ok());
  }
  CHECK(q.EpochsDone(1));
  CHECK_FALSE(q.EpochsDone(2));
  CHECK(q.EpochsDone(0));
  const DataChunk a = MustLease(q, 0);  // (1, 0)
  const DataChunk b = MustLease(q, 1);  // (1, 1)
  const DataChunk c = MustLease(q, 0);  // (1, 2): none left to hand out
  REQUIRE(c.epoch == 1);
  CHECK(q.NextLeaseEpoch() == 2);
  REQUIRE(q.Done(0, a.epoch, a.index, a.lease).ok());
  REQUIRE(q.Done(0, c.epoch, c.index, c.lease).ok());
  // Worker 1 holds (1, 1): the run waits for it.
  CHECK_FALSE(q.EpochsDone(2));
  std::vector<LeasedChunk> out = q.LeasedBefore(2);
  REQUIRE(out.size() == 1);
  CHECK((out[0].epoch == 1 && out[0].index == 1 && out[0].worker == 1 &&
         out[0].lease == b.lease));
  CHECK(q.LeasedBefore(1).empty());
  // Worker 1 dies: its chunk is back, for worker 0, before any of epoch 2.
  REQUIRE(*q.WorkerGone(1) == 1);
  CHECK(q.LeasedBefore(2).empty());
  CHECK_FALSE(q.EpochsDone(2));
  CHECK(q.NextLeaseEpoch() == 1);
  const DataChunk b2 = MustLease(q, 0);
  CHECK((b2.epoch == 1 && b2.index == 1));
  CHECK(b2.samples == b.samples);
  CHECK(q.LeasedBefore(2).size() == 1);
  CHECK_FALSE(q.EpochsDone(2));
  REQUIRE(q.Done(0, b2.epoch, b2.index, b2.lease).ok());
  CHECK(q.LeasedBefore(2).empty());
  CHECK(q.EpochsDone(2));
  CHECK(q.counters().epochs_completed == 2);
}

TEST_CASE("refusals name what is wrong and change nothing") {
  DataQueue q = MakeQueue(15, 5, 3);  // 3 chunks an epoch
  int done_calls = 0;
  q.set_on_done([&](int, int64_t, int64_t, const std::vector<int64_t>&) {
    ++done_calls;
  });
  const DataChunk a = MustLease(q, 0);  // (0, 0)
  const DataChunk b = MustLease(q, 1);  // (0, 1)
  const DataChunk e = MustLease(q, 4);  // (0, 2)
  REQUIRE(q.Done(0, a.epoch, a.index, a.lease).ok());
  const DataChunk c = MustLease(q, 2);  // (1, 0)
  REQUIRE(q.Return(2, c.epoch, c.index, c.lease).ok());
  const DataChunk c2 = MustLease(q, 3);  // (1, 0) again
  REQUIRE(c2.index == c.index);
  const std::string before = Describe(q);
  const int done_before = done_calls;

  struct Case {
    const char* what;
    int worker;
    int64_t epoch, index;
    uint64_t lease;
    absl::StatusCode code;
    const char* message;
  };
  const uint64_t next_gen_lease = uint64_t{1} << DataQueue::kLeaseSequenceBits;
  const std::vector<Case> cases = {
      {"done twice", 0, 0, 0, a.lease, absl::StatusCode::kFailedPrecondition,
       "chunk (epoch 0, index 0) is already done"},
      {"an old lease of a chunk leased again", 2, 1, 0, c.lease,
       absl::StatusCode::kFailedPrecondition,
       "is not chunk (epoch 1, index 0)'s current lease"},
      {"another chunk's lease", 1, 0, 1, e.lease,
       absl::StatusCode::kFailedPrecondition, "current lease (1)"},
      {"another epoch's lease", 3, 0, 1, c2.lease,
       absl::StatusCode::kFailedPrecondition, "current lease (1)"},
      {"a worker without the lease", 9, 0, 1, b.lease,
       absl::StatusCode::kPermissionDenied,
       "worker 9 does not hold lease 1 of chunk (epoch 0, index 1) (worker 1 "
       "does)"},
      {"a negative worker", -1, 0, 1, b.lease,
       absl::StatusCode::kInvalidArgument, "worker -1"},
      {"a negative epoch", 1, -1, 1, b.lease,
       absl::StatusCode::kInvalidArgument, "epoch -1"},
      {"a negative index", 1, 0, -1, b.lease,
       absl::StatusCode::kInvalidArgument, "index -1"},
      {"an index past the epoch", 1, 0, 3, b.lease,
       absl::StatusCode::kInvalidArgument, "chunks per epoch (3)"},
      {"an epoch not begun", 1, 2, 0, b.lease, absl::StatusCode::kNotFound,
       "epoch 2 has not begun (the current epoch is 1)"},
      {"a chunk never leased", 3, 1, 1, c2.lease, absl::StatusCode::kNotFound,
       "chunk (epoch 1, index 1) was never leased"},
      {"a lease never issued", 1, 0, 1, 1000, absl::StatusCode::kNotFound,
       "lease 1000 of chunk (epoch 0, index 1) was never issued"},
      {"a lease of a later generation", 1, 0, 1, next_gen_lease,
       absl::StatusCode::kNotFound, "was never issued (generation 1"},
  };
  for (const Case& k : cases) {
    for (bool done : {true, false}) {
      INFO(k.what << (done ? " (Done)" : " (Return)"));
      const absl::Status s =
          done ? q.Done(k.worker, k.epoch, k.index, k.lease)
               : q.Return(k.worker, k.epoch, k.index, k.lease);
      CHECK(s.code() == k.code);
      CHECK_THAT(std::string(s.message()), Catch::Contains(k.message));
      CHECK(Describe(q) == before);
    }
  }
  CHECK(done_calls == done_before);

  // Returned twice, and done after being returned.
  REQUIRE(q.Return(1, b.epoch, b.index, b.lease).ok());
  const std::string returned = Describe(q);
  absl::Status s = q.Return(1, b.epoch, b.index, b.lease);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("was already returned; it is in the queue"));
  s = q.Done(1, b.epoch, b.index, b.lease);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Describe(q) == returned);
  CHECK(done_calls == done_before);
}

TEST_CASE("the ledger hook gets each done chunk's samples") {
  DataQueue q = MakeQueue(7, 3, 11);
  std::vector<std::string> ledger;
  q.set_on_done([&](int worker, int64_t epoch, int64_t index,
                    const std::vector<int64_t>& samples) {
    ledger.push_back(FormatLedgerLine(worker, -1, 0, epoch, index, samples));
  });
  const DataChunk a = MustLease(q, 4);
  const DataChunk b = MustLease(q, 5);
  const DataChunk c = MustLease(q, 6);
  REQUIRE(c.samples.size() == 1);
  REQUIRE(q.Done(6, c.epoch, c.index, c.lease).ok());
  REQUIRE(q.Return(5, b.epoch, b.index, b.lease).ok());
  REQUIRE(q.Done(4, a.epoch, a.index, a.lease).ok());
  CHECK(ledger == std::vector<std::string>{
                      FormatLedgerLine(6, -1, 0, 0, 2, c.samples),
                      FormatLedgerLine(4, -1, 0, 0, 0, a.samples),
                  });
  CHECK_THAT(ledger[0], Catch::Contains(absl::StrCat("\"first\":", c.samples[0],
                                                     ",\"count\":1}")));
}

// A chunk a simulated worker holds.
struct Held {
  int worker;
  DataChunk chunk;
};

// Workers lease, finish, drop and leave at random (the test's own
// SplitMix64, so the run is the same everywhere); with `restore_at` > 0 the
// queue is snapshotted at step restore_at / 2 and restored at restore_at
// (the ledger cut back to the snapshot, every lease held then void). At the
// end every held chunk is done: then every epoch before the current one is
// complete and has had each sample exactly once, and the current one at
// most once.
void RunRandomWorkers(uint64_t seed, int workers, int64_t num_samples,
                      int64_t chunk_size, int steps, int restore_at,
                      bool restore_in_place) {
  SplitMix64 rng(seed);
  absl::StatusOr<DataQueue> created =
      DataQueue::Create({num_samples, chunk_size, seed});
  REQUIRE(created.ok());
  std::optional<DataQueue> q(*std::move(created));
  // The ledger: (epoch, samples) per Done, in order.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> ledger;
  auto on_done = [&](int, int64_t epoch, int64_t index,
                     const std::vector<int64_t>& samples) {
    ledger.emplace_back(epoch, samples);
  };
  q->set_on_done(on_done);
  std::vector<Held> held;
  DataQueueState snapshot;
  size_t ledger_at_snapshot = 0;
  for (int step = 0; step < steps; ++step) {
    if (restore_at > 0 && step == restore_at / 2) {
      snapshot = q->Snapshot();
      ledger_at_snapshot = ledger.size();
    }
    if (restore_at > 0 && step == restore_at) {
      if (restore_in_place) {
        REQUIRE(q->Restore(snapshot).ok());
      } else {
        absl::StatusOr<DataQueue> r =
            DataQueue::Restore(q->options(), snapshot);
        REQUIRE(r.ok());
        q.emplace(*std::move(r));
        q->set_on_done(on_done);
      }
      CHECK(q->generation() == 1);
      ledger.resize(ledger_at_snapshot);
      for (const Held& h : held) {
        const absl::Status s =
            q->Done(h.worker, h.chunk.epoch, h.chunk.index, h.chunk.lease);
        REQUIRE(s.code() == absl::StatusCode::kFailedPrecondition);
        CHECK_THAT(std::string(s.message()),
                   Catch::Contains("is of generation 0, void since the queue "
                                   "was restored to generation 1"));
      }
      held.clear();
    }
    const uint64_t op = rng.Below(100);
    if (op < 45 || held.empty()) {
      const int w = static_cast<int>(rng.Below(workers));
      Held h{w, MustLease(*q, w)};
      REQUIRE(h.chunk.samples == q->ChunkSamples(h.chunk.epoch, h.chunk.index));
      held.push_back(std::move(h));
    } else if (op < 95) {
      const size_t k = rng.Below(held.size());
      const Held h = held[k];
      held.erase(held.begin() + k);
      const bool done = op < 75;
      const absl::Status s =
          done ? q->Done(h.worker, h.chunk.epoch, h.chunk.index, h.chunk.lease)
               : q->Return(h.worker, h.chunk.epoch, h.chunk.index,
                           h.chunk.lease);
      REQUIRE(s.ok());
      if (done) REQUIRE(ledger.back().second == h.chunk.samples);
      // Done or returned twice: refused.
      REQUIRE(q->Done(h.worker, h.chunk.epoch, h.chunk.index, h.chunk.lease)
                  .code() == absl::StatusCode::kFailedPrecondition);
    } else {
      const int w = static_cast<int>(rng.Below(workers));
      const int64_t holds =
          std::count_if(held.begin(), held.end(),
                        [w](const Held& h) { return h.worker == w; });
      absl::StatusOr<int64_t> gone = q->WorkerGone(w);
      REQUIRE(gone.ok());
      REQUIRE(*gone == holds);
      held.erase(std::remove_if(held.begin(), held.end(),
                                [w](const Held& h) { return h.worker == w; }),
                 held.end());
    }
    if (restore_at == 0) {
      const DataQueueCounters& c = q->counters();
      REQUIRE(c.leased == c.done + c.returned + q->Position().chunks_out);
      REQUIRE(q->Position().chunks_out == static_cast<int64_t>(held.size()));
    }
  }
  // Finish what is held; what is queued stays queued (not in the ledger).
  for (const Held& h : held) {
    REQUIRE(
        q->Done(h.worker, h.chunk.epoch, h.chunk.index, h.chunk.lease).ok());
  }
  while (q->Position().chunks_queued > 0) {
    const DataChunk c = MustLease(*q, 0);
    REQUIRE(q->Done(0, c.epoch, c.index, c.lease).ok());
  }
  const int64_t current = q->Position().epoch;
  REQUIRE(current >= 2);                      // the run crossed epochs
  std::map<int64_t, std::vector<int>> times;  // epoch -> per sample
  for (const auto& [epoch, samples] : ledger) {
    std::vector<int>& t = times[epoch];
    t.resize(num_samples);
    for (int64_t x : samples) ++t[x];
  }
  for (int64_t e = 0; e <= current; ++e) {
    INFO("epoch " << e << " of " << current);
    std::vector<int>& t = times[e];
    t.resize(num_samples);
    const int64_t once = std::count(t.begin(), t.end(), 1);
    const int64_t never = std::count(t.begin(), t.end(), 0);
    REQUIRE(once + never == num_samples);  // none twice
    if (e < current) REQUIRE(once == num_samples);
  }
  const DataQueuePosition p = q->Position();
  CHECK(p.chunks_out == 0);
  CHECK(q->counters().epochs_completed ==
        current + (p.chunks_done == p.chunks_in_epoch ? 1 : 0));
}

TEST_CASE(
    "each sample once per epoch, however chunks are done, returned or "
    "lost") {
  for (uint64_t seed : {1, 2, 3}) {
    for (int workers : {1, 3, 8}) {
      INFO("seed " << seed << ", workers " << workers);
      // 103 samples in chunks of 10: 11 chunks, the last of 3.
      RunRandomWorkers(seed, workers, 103, 10, 400, 0, false);
    }
  }
}

TEST_CASE("each sample once per epoch across a restore (in place or not)") {
  for (uint64_t seed : {4, 5, 6}) {
    for (bool in_place : {true, false}) {
      INFO("seed " << seed << (in_place ? ", in place" : ", a new queue"));
      RunRandomWorkers(seed, 4, 50, 7, 600, 300, in_place);
    }
  }
}

TEST_CASE(
    "a restore puts the position back, queues what was out and voids "
    "old leases") {
  DataQueue q = MakeQueue(30, 10, 8);   // 3 chunks an epoch
  const DataChunk a = MustLease(q, 0);  // (0, 0)
  const DataChunk b = MustLease(q, 1);  // (0, 1)
  const DataChunk c = MustLease(q, 2);  // (0, 2)
  REQUIRE(q.Done(1, b.epoch, b.index, b.lease).ok());
  REQUIRE(q.Return(2, c.epoch, c.index, c.lease).ok());
  const DataChunk d = MustLease(q, 3);  // (0, 2) again
  const DataChunk e = MustLease(q, 3);  // (1, 0)
  const DataQueueState s = q.Snapshot();
  CHECK(s.generation == 0);
  CHECK(s.next_lease_sequence == 5);
  REQUIRE(s.epochs.size() == 2);
  CHECK(s.epochs[0].epoch == 0);
  CHECK(s.epochs[0].next_index == 3);
  CHECK(s.epochs[0].outstanding == std::vector<int64_t>{0, 2});
  CHECK(s.epochs[1].epoch == 1);
  CHECK(s.epochs[1].next_index == 1);
  CHECK(s.epochs[1].outstanding == std::vector<int64_t>{0});
  CHECK(s.counters.leased == 5);
  CHECK(s.counters.done == 1);
  CHECK(s.counters.returned == 1);

  // Later work, then the rollback to the snapshot.
  REQUIRE(q.Done(0, a.epoch, a.index, a.lease).ok());
  const DataChunk f = MustLease(q, 4);  // (1, 1)
  REQUIRE(q.Restore(s).ok());
  CHECK(q.generation() == 1);
  CHECK(q.counters().leased == 5);
  CHECK(q.counters().done == 1);
  const DataQueuePosition p = q.Position();
  CHECK(p.epoch == 1);
  CHECK(p.chunks_out == 0);
  CHECK(p.chunks_queued == 3);
  for (const DataChunk& old : {a, d, e, f}) {
    const absl::Status st = q.Done(3, old.epoch, old.index, old.lease);
    CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(st.message()),
               Catch::Contains("is of generation 0, void since the queue was "
                               "restored to generation 1"));
  }
  // What was out at the snapshot comes first, then epoch 1's chunk 1.
  std::vector<std::pair<int64_t, int64_t>> order;
  for (int i = 0; i < 4; ++i) {
    const DataChunk g = MustLease(q, 5);
    CHECK(g.generation == 1);
    CHECK(DataQueue::LeaseGeneration(g.lease) == 1);
    CHECK(g.lease > f.lease);
    order.emplace_back(g.epoch, g.index);
  }
  CHECK(order == std::vector<std::pair<int64_t, int64_t>>{
                     {0, 0}, {0, 2}, {1, 0}, {1, 1}});

  // A new queue from the same state: the next generation, or the one asked.
  absl::StatusOr<DataQueue> r = DataQueue::Restore(q.options(), s);
  REQUIRE(r.ok());
  CHECK(r->generation() == 1);
  CHECK(r->Snapshot().epochs.size() == 2);
  r = DataQueue::Restore(q.options(), s, /*min_generation=*/7);
  REQUIRE(r.ok());
  CHECK(r->generation() == 7);
  CHECK(DataQueue::LeaseGeneration(MustLease(*r, 0).lease) == 7);
  // Restoring the same state in place again still starts a new generation.
  REQUIRE(q.Restore(s).ok());
  CHECK(q.generation() == 2);
}

TEST_CASE("a snapshot round trip of a fresh and a finished epoch") {
  DataQueue q = MakeQueue(4, 2, 9);
  DataQueueState s = q.Snapshot();
  REQUIRE(s.epochs.size() == 1);
  CHECK(s.epochs[0].next_index == 0);
  for (int i = 0; i < 2; ++i) {
    const DataChunk c = MustLease(q, 0);
    REQUIRE(q.Done(0, c.epoch, c.index, c.lease).ok());
  }
  s = q.Snapshot();
  CHECK(q.counters().epochs_completed == 1);
  absl::StatusOr<DataQueue> r = DataQueue::Restore(q.options(), s);
  REQUIRE(r.ok());
  CHECK(r->counters().epochs_completed == 1);
  const DataChunk c = MustLease(*r, 0);
  CHECK(c.epoch == 1);
  CHECK(c.index == 0);
}

TEST_CASE("a restore refuses a state of other options or out of range") {
  DataQueue q = MakeQueue(30, 10, 8);
  const DataChunk a = MustLease(q, 0);
  const DataQueueState good = q.Snapshot();
  const std::string before = Describe(q);
  struct Case {
    const char* what;
    std::function<void(DataQueueState&)> change;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"num_samples", [](DataQueueState& s) { s.num_samples = 31; },
       absl::StatusCode::kInvalidArgument,
       "num_samples 31 differs from the options' 30"},
      {"chunk_size", [](DataQueueState& s) { s.chunk_size = 5; },
       absl::StatusCode::kInvalidArgument,
       "chunk_size 5 differs from the options' 10"},
      {"seed", [](DataQueueState& s) { s.seed = 1; },
       absl::StatusCode::kInvalidArgument,
       "seed 1 differs from the options' 8"},
      {"no epoch", [](DataQueueState& s) { s.epochs.clear(); },
       absl::StatusCode::kDataLoss, "no epoch in progress"},
      {"next_index", [](DataQueueState& s) { s.epochs[0].next_index = 4; },
       absl::StatusCode::kDataLoss, "next_index 4 is not in 0..3"},
      {"an outstanding index not leased",
       [](DataQueueState& s) {
         s.epochs[0].outstanding = {0, 1};
       },
       absl::StatusCode::kDataLoss, "outstanding index 1 is not in 0..0"},
      {"outstanding out of order",
       [](DataQueueState& s) {
         s.epochs[0].next_index = 3;
         s.epochs[0].outstanding = {2, 1};
       },
       absl::StatusCode::kDataLoss, "outstanding index 1"},
      {"epochs out of order",
       [](DataQueueState& s) {
         s.epochs[0].next_index = 3;
         s.epochs.push_back(s.epochs[0]);
       },
       absl::StatusCode::kDataLoss, "not after the one before"},
      {"an older epoch with chunks never leased",
       [](DataQueueState& s) {
         DataQueueEpochState e = s.epochs[0];
         e.epoch = 1;
         s.epochs.push_back(e);
       },
       absl::StatusCode::kDataLoss, "epoch 0 is not the last"},
      {"a negative epoch", [](DataQueueState& s) { s.epochs[0].epoch = -1; },
       absl::StatusCode::kDataLoss, "epoch -1 is negative"},
      {"a negative counter", [](DataQueueState& s) { s.counters.done = -1; },
       absl::StatusCode::kDataLoss, "done -1"},
      {"a generation", [](DataQueueState& s) { s.generation = -3; },
       absl::StatusCode::kDataLoss, "generation -3"},
      {"a lease sequence",
       [](DataQueueState& s) { s.next_lease_sequence = ~uint64_t{0}; },
       absl::StatusCode::kDataLoss, "next_lease_sequence"},
  };
  for (const Case& k : cases) {
    INFO(k.what);
    DataQueueState s = good;
    k.change(s);
    absl::Status st = q.Restore(s);
    CHECK(st.code() == k.code);
    CHECK_THAT(std::string(st.message()), Catch::Contains(k.message));
    CHECK(Describe(q) == before);
    st = DataQueue::Restore(q.options(), s).status();
    CHECK(st.code() == k.code);
  }
  CHECK(q.Done(0, a.epoch, a.index, a.lease).ok());  // still generation 0
}

}  // namespace
}  // namespace ps
}  // namespace psgd
