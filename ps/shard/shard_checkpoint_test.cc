// ParameterShard's checkpoints and rollbacks: what is saved when (step 0,
// every K steps, on request, at shutdown), that a restored shard holds the
// whole state (weights, Adam's m, v and t, step, membership, counters) and
// waits for the rollback, that the pending sync aggregate is dropped and its
// workers push again, that a Rollback returns a live shard to a checkpoint,
// ends waiting pulls with ABORTED and refuses the old generation, and a
// two-shard restart.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "common/file_io.h"
#include "ps/checkpoint/checkpoint_store.h"
#include "ps/shard/shard.h"
#include "ps/testing/checkpoint_test_util.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::FreshDir;
using testing::MakeShard;
using testing::Push;
using testing::ShardPicture;
using testing::TwoVariables;

TwoVariables Gradient(int w, int64_t s) { return testing::ExactGradient(w, s); }

ShardOptions CheckpointOptions(const std::string& dir, int every_steps,
                               int shard = 0, int num_shards = 1) {
  ShardOptions o;
  o.replicas_to_aggregate = 2;
  o.total_num_replicas = 2;
  o.shard_index = shard;
  o.num_shards = num_shards;
  o.checkpoint.dir = dir;
  o.checkpoint.every_steps = every_steps;
  return o;
}

// Both workers push for the shard's current step: one sync step.
void Step(ParameterShard& shard, int64_t generation = 0) {
  const int64_t s = shard.Status().step;
  for (int w = 0; w < 2; ++w) {
    auto r = shard.Push(w, s, Gradient(w, s).Bytes(), generation);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
  }
}

std::unique_ptr<ParameterShard> Restart(const ShardOptions& o) {
  auto shard = ParameterShard::Create(o);
  INFO(shard.status().ToString());
  REQUIRE(shard.ok());
  return *std::move(shard);
}

TEST_CASE("pushes and pulls go on while the disk holds a checkpoint") {
  const std::string dir = FreshDir("held-disk");
  ShardOptions o = CheckpointOptions(dir, 2);
  // A disk that holds the write of checkpoint step-2 until the test lets
  // it go (the writer thread waits in it).
  absl::Notification disk_free;
  std::atomic<int> held{0};
  o.checkpoint.write_file = [&](const std::string& path,
                                absl::string_view bytes) {
    if (absl::StrContains(path, "/step-2/")) {
      ++held;
      disk_free.WaitForNotification();
    }
    return WriteFileAtomically(path, bytes);
  };
  auto shard = MakeShard(o);  // saves step 0
  shard->FlushCheckpoints();
  // Seven steps and a pull of the last, on a thread, so that a shard that
  // waited for the disk fails the test instead of hanging it: the save of
  // step 2 waits for the disk, and the steps after it go on.
  absl::Notification stepped;
  absl::StatusOr<ParameterShard::Snapshot> pulled =
      absl::UnknownError("not pulled");
  std::thread worker([&] {
    for (int i = 0; i < 7; ++i) Step(*shard);
    pulled = shard->Pull(7, 0, absl::Now() + absl::Seconds(60));
    stepped.Notify();
  });
  const bool went_on = stepped.WaitForNotificationWithTimeout(absl::Minutes(1));
  if (!went_on) {
    disk_free.Notify();  // a shard that waits for the disk goes on now
    worker.join();
    FAIL("the steps did not go on while the disk held step-2");
  }
  // The writer is in the held write (or about to be).
  const absl::Time give_up = absl::Now() + absl::Minutes(1);
  while (held.load() == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  CHECK(held.load() == 1);
  const ShardStatus during = shard->Status();
  disk_free.Notify();
  worker.join();
  REQUIRE(pulled.ok());
  CHECK((*pulled)->step == 7);
  CHECK(during.step == 7);
  CHECK(during.checkpoints_written == 1);  // step 0; step 2 on the disk
  // Then the disk catches up: steps 2, 4 and 6 were queued, none dropped.
  shard->FlushCheckpoints();
  const ShardStatus after = shard->Status();
  CHECK(after.checkpoints_written == 4);
  CHECK(after.checkpoint_failures == 0);
  CHECK(after.last_checkpoint_label == 6);
}

TEST_CASE("a restored shard holds the whole state and waits for the rollback") {
  const std::string dir = FreshDir("restore");
  const ShardOptions o = CheckpointOptions(dir, 2);
  auto shard = MakeShard(o);  // saves step 0
  Step(*shard);
  Step(*shard);  // step 2: saved
  shard->FlushCheckpoints();
  const ShardPicture at2 = ShardPicture::Of(*shard);
  CHECK(at2.step == 2);
  CHECK(shard->Status().checkpoints_written == 2);
  CHECK(shard->Status().last_checkpoint_label == 2);
  Step(*shard);  // step 3, not saved
  const ShardPicture at3 = ShardPicture::Of(*shard);
  REQUIRE(Push(*shard, 0, 3, Gradient(0, 3)).ok());  // pending

  // A new process: the first one "crashed" (it is never shut down here).
  auto restarted = Restart(o);
  CHECK(restarted->restore_report().label == 2);
  CHECK(restarted->restore_report().refused.empty());
  ShardStatus s = restarted->Status();
  CHECK(s.awaiting_rollback);
  CHECK(s.restored_label == 2);
  CHECK(s.step == 2);
  CHECK(s.initialized);
  auto push = Push(*restarted, 0, 2, Gradient(0, 2));
  CHECK(push.status().code() == absl::StatusCode::kAborted);
  CHECK_THAT(std::string(push.status().message()),
             Catch::Contains("restored checkpoint step-2"));
  CHECK(restarted->Pull(0, 0, absl::Now()).status().code() ==
        absl::StatusCode::kAborted);
  // A second Initialize with the same variables is no reset.
  auto init = restarted->Initialize(testing::InitialValues().Bytes());
  REQUIRE(init.ok());
  CHECK(init->already_initialized);

  auto rolled = restarted->Rollback(2, 2);
  REQUIRE(rolled.ok());
  CHECK(rolled->rolled_back);
  CHECK(rolled->step == 2);
  s = restarted->Status();
  CHECK_FALSE(s.awaiting_rollback);
  CHECK(s.generation == 2);
  CHECK(s.rollbacks == std::vector<RollbackRecord>{{2, 2, 2, 2}});
  CHECK(ShardPicture::Of(*restarted) == at2);

  // Training goes on from step 2 in generation 2. Redoing the lost step
  // with the same gradients gives exactly the state the crashed shard had:
  // nothing up to the checkpoint was lost (weights, Adam's m, v and t,
  // counters), and what came after it is redone, not half-kept.
  Step(*restarted, 2);
  CHECK(restarted->Status().step == 3);
  CHECK(ShardPicture::Of(*restarted) == at3);
}

TEST_CASE("the pending aggregate is not saved: its workers push for it again") {
  const std::string dir = FreshDir("pending");
  const ShardOptions o = CheckpointOptions(dir, 0);
  {
    auto shard = MakeShard(o);
    Step(*shard);
    REQUIRE(Push(*shard, 0, 1, Gradient(0, 1)).ok());  // pending for step 1
    CHECK(shard->Status().pending_gradients == 1);
    shard->Shutdown("done");  // saves step 1 without the pending gradient
  }
  auto restarted = Restart(o);
  CHECK(restarted->restore_report().label == 1);
  REQUIRE(restarted->Rollback(1, 2).ok());
  CHECK(restarted->Status().pending_gradients == 0);
  auto again = Push(*restarted, 0, 1, Gradient(0, 1));
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK(again->outcome == PushOutcome::kAggregated);
  // ... but not twice.
  CHECK(Push(*restarted, 0, 1, Gradient(0, 1)).status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("a rollback returns a live shard to a checkpoint") {
  const std::string dir = FreshDir("rollback");
  auto shard = MakeShard(CheckpointOptions(dir, 2));
  Step(*shard);
  Step(*shard);
  shard->FlushCheckpoints();
  const ShardPicture at2 = ShardPicture::Of(*shard);
  for (int i = 0; i < 3; ++i) Step(*shard);  // step 5; step 4 saved
  shard->FlushCheckpoints();
  REQUIRE(std::filesystem::exists(dir + "/step-4"));

  std::atomic<int> aborted{0};
  shard->PullAsync(6, 1, [&](absl::StatusOr<ParameterShard::Snapshot> s) {
    if (absl::IsAborted(s.status())) ++aborted;
  });
  auto rolled = shard->Rollback(2, 2);
  REQUIRE(rolled.ok());
  CHECK(rolled->rolled_back);
  CHECK(rolled->step == 2);
  CHECK(rolled->generation == 2);
  CHECK(aborted == 1);
  CHECK(ShardPicture::Of(*shard) == at2);
  CHECK(shard->Status().rollbacks == std::vector<RollbackRecord>{{2, 2, 5, 2}});
  shard->FlushCheckpoints();
  CHECK_FALSE(std::filesystem::exists(dir + "/step-4"));

  // The old generation is refused; the new one and "any" are taken.
  auto old = shard->Push(0, 2, Gradient(0, 2).Bytes(), 1);
  CHECK(old.status().code() == absl::StatusCode::kAborted);
  CHECK_THAT(std::string(old.status().message()),
             Catch::Contains("generation 1"));
  CHECK(shard->Pull(0, 0, absl::Now(), 1).status().code() ==
        absl::StatusCode::kAborted);
  auto pulled = shard->Pull(0, 0, absl::Now(), 2);
  REQUIRE(pulled.ok());
  CHECK((*pulled)->generation == 2);
  REQUIRE(shard->Push(0, 2, Gradient(0, 2).Bytes(), 2).ok());
  REQUIRE(shard->Push(1, 2, Gradient(1, 2).Bytes(), 0).ok());
  CHECK(shard->Status().step == 3);

  // The same request again (another worker's) or an older one: nothing.
  auto again = shard->Rollback(2, 2);
  REQUIRE(again.ok());
  CHECK_FALSE(again->rolled_back);
  CHECK(again->step == 3);
  CHECK_FALSE(shard->Rollback(0, 1)->rolled_back);
  // A checkpoint that is not there leaves the shard as it is.
  CHECK(absl::IsNotFound(shard->Rollback(40, 3).status()));
  CHECK(shard->Status().generation == 2);
}

TEST_CASE("checkpoints on request: now, or at the first step past the label") {
  const std::string dir = FreshDir("request");
  auto shard = MakeShard(CheckpointOptions(dir, 0));
  Step(*shard);
  REQUIRE(shard->RequestCheckpoint(3, false).ok());
  Step(*shard);
  shard->FlushCheckpoints();
  CHECK(shard->Status().last_checkpoint_label == 0);
  Step(*shard);  // step 3
  shard->FlushCheckpoints();
  CHECK(shard->Status().last_checkpoint_label == 3);
  REQUIRE(shard->RequestCheckpoint(10, true).ok());
  shard->FlushCheckpoints();
  auto store = CheckpointStore::Open({dir, "psgd", 0, 1, 3});
  REQUIRE(store.ok());
  auto c = (*store)->Read(10);
  REQUIRE(c.ok());
  CHECK(c->step == 3);
  CHECK((*store)->Labels() == std::vector<int64_t>{0, 3, 10});
  CHECK(shard->RequestCheckpoint(-1, true).code() ==
        absl::StatusCode::kInvalidArgument);

  ShardOptions none = CheckpointOptions("", 0);
  auto plain = MakeShard(none);
  CHECK(plain->RequestCheckpoint(1, true).code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(plain->Rollback(0, 2).status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("a checkpoint of another cluster shape is refused at restore") {
  const std::string dir = FreshDir("mismatch");
  MakeShard(CheckpointOptions(dir, 1))->FlushCheckpoints();
  ShardOptions other = CheckpointOptions(dir, 1);
  other.total_num_replicas = 3;
  absl::Status s = ParameterShard::Create(other).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("3 workers"));
}

// A step of two shards of one cluster: both stage each worker's push, shard
// 0 decides it, and its decision reaches shard 1 (through `s1`, which may be
// a restarted object).
void StepBoth(std::unique_ptr<ParameterShard>& s0,
              std::unique_ptr<ParameterShard>& s1) {
  s0->ConnectFollowers(
      [&s1](int, int64_t generation, absl::Span<const Decision> decisions) {
        return s1->ApplyDecisions(generation, decisions);
      });
  const int64_t s = s0->Status().step;
  for (int w = 0; w < 2; ++w) {
    const uint64_t id = static_cast<uint64_t>(s * 2 + w + 1);
    for (ParameterShard* shard : {s0.get(), s1.get()}) {
      auto r = shard->Push(w, s, Gradient(w, s).Bytes(), 0, nullptr, id);
      INFO(r.status().ToString());
      REQUIRE(r.ok());
    }
    REQUIRE(s0->Commit(w, s, 0, id).ok());
  }
  REQUIRE(s0->AwaitDecisionsDelivered(absl::Now() + absl::Seconds(30)));
  REQUIRE(s1->Status().step == s + 1);
}

TEST_CASE("two shards: the restarted one restores, both roll back to it") {
  const std::string dir = FreshDir("two");
  const ShardOptions o0 = CheckpointOptions(dir, 2, 0, 2);
  const ShardOptions o1 = CheckpointOptions(dir, 2, 1, 2);
  auto s0 = MakeShard(o0);
  auto s1 = MakeShard(o1);
  for (int i = 0; i < 2; ++i) StepBoth(s0, s1);
  s0->FlushCheckpoints();
  s1->FlushCheckpoints();
  const ShardPicture p0 = ShardPicture::Of(*s0), p1 = ShardPicture::Of(*s1);
  StepBoth(s0, s1);  // step 3

  // Shard 1 goes away (its object saves step-3 for itself only: partial).
  s1.reset();
  s1 = Restart(o1);
  CHECK(s1->restore_report().label == 2);
  REQUIRE(s1->restore_report().refused.size() == 1);
  CHECK_THAT(s1->restore_report().refused[0],
             Catch::Contains("step-3") && Catch::Contains("partial"));

  // What a worker does on seeing it: roll both back to step-2, generation 2.
  for (ParameterShard* s : {s0.get(), s1.get()}) {
    auto r = s->Rollback(2, 2);
    REQUIRE(r.ok());
    CHECK(r->rolled_back);
  }
  CHECK(ShardPicture::Of(*s0) == p0);
  CHECK(ShardPicture::Of(*s1) == p1);
  CHECK(s0->Status().rollbacks == std::vector<RollbackRecord>{{2, 2, 3, 2}});
  CHECK(s1->Status().rollbacks == std::vector<RollbackRecord>{{2, 2, 2, 2}});
  s1->FlushCheckpoints();
  CHECK_FALSE(std::filesystem::exists(dir + "/step-3"));
}

TEST_CASE("elastic membership: every worker id's last push is saved") {
  const std::string dir = FreshDir("elastic");
  ShardOptions o = CheckpointOptions(dir, 2);
  o.max_workers = 4;  // ids 2 and 3 beyond the 2 listed workers
  auto shard = MakeShard(o);
  REQUIRE(shard->Join(3).ok());
  Step(*shard);  // workers 0 and 1 complete step 0
  REQUIRE(shard->Push(3, 1, Gradient(0, 1).Bytes()).ok());
  REQUIRE(shard->Push(0, 1, Gradient(0, 1).Bytes()).ok());  // step 2: saved
  shard->FlushCheckpoints();
  CHECK(shard->Status().checkpoint_failures == 0);
  CHECK(shard->Status().last_checkpoint_label == 2);
  auto restarted = Restart(o);
  CHECK(restarted->restore_report().label == 2);
  // A join during the rollback: refused by name, nothing changed.
  const std::vector<int> live = restarted->Status().live_workers;
  CHECK_FALSE(std::count(live.begin(), live.end(), 2));
  auto early = restarted->Join(2, /*incarnation=*/7);
  CHECK(early.status().code() == absl::StatusCode::kAborted);
  CHECK_THAT(std::string(early.status().message()),
             Catch::Contains("join of worker 2 refused") &&
                 Catch::Contains("roll back"));
  CHECK(restarted->Status().live_workers == live);
  REQUIRE(restarted->Rollback(2, 2).ok());
  REQUIRE(restarted->Join(2, 7).ok());
  REQUIRE(restarted->Join(3).ok());
  // Worker 3's push for step 1 is remembered: a second one is refused.
  CHECK(PushRefusalOf(
            restarted->Push(3, 1, Gradient(0, 1).Bytes(), 2).status()) ==
        PushRefusal::kAlreadyPushed);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
