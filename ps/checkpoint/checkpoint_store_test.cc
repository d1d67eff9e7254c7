// The checkpoint directory: a checkpoint is complete once every shard's file
// is there (the last writer adds the MANIFEST); restoring takes the newest
// complete one and names each newer one it refused (partial, corrupt,
// truncated, generations that differ); old checkpoints are pruned; a
// rollback deletes later ones. And the writer thread: saves in order,
// Flush, and the count of failures.
#include "ps/checkpoint/checkpoint_store.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/file_io.h"
#include "ps/checkpoint/checkpoint_writer.h"
#include "ps/testing/checkpoint_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::FreshDir;
using testing::SmallCheckpoint;

std::unique_ptr<CheckpointStore> Open(const std::string& dir, int shard,
                                      int keep = 3) {
  auto store = CheckpointStore::Open({dir, "c", shard, 2, keep});
  REQUIRE(store.ok());
  return *std::move(store);
}

// Both shards write checkpoint `label` at `step`.
void WriteBoth(CheckpointStore& a, CheckpointStore& b, int64_t label,
               int64_t step, int64_t generation = 1) {
  REQUIRE(a.Write(SmallCheckpoint(0, 2, label, step, generation)).ok());
  REQUIRE(b.Write(SmallCheckpoint(1, 2, label, step, generation)).ok());
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

TEST_CASE("a checkpoint is complete once every shard has written it") {
  const std::string dir = FreshDir("complete");
  auto a = Open(dir, 0), b = Open(dir, 1);
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 10, 10)).ok());
  CHECK(Exists(dir + "/step-10/shard-0-of-2.ckpt"));
  CHECK_FALSE(Exists(dir + "/step-10/MANIFEST"));
  absl::Status partial = a->Read(10).status();
  CHECK(partial.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(partial.message()), Catch::Contains("partial"));
  std::vector<std::string> refused;
  CHECK(absl::IsNotFound(a->ReadNewestComplete(&refused).status()));
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0], Catch::StartsWith("checkpoint step-10 refused: "));

  REQUIRE(b->Write(SmallCheckpoint(1, 2, 10, 10)).ok());
  CHECK(Exists(dir + "/step-10/MANIFEST"));
  absl::StatusOr<ShardCheckpoint> own = a->Read(10);
  REQUIRE(own.ok());
  CHECK(own->shard_index == 0);
  CHECK(own->step == 10);
  refused.clear();
  absl::StatusOr<ShardCheckpoint> newest = b->ReadNewestComplete(&refused);
  REQUIRE(newest.ok());
  CHECK(newest->shard_index == 1);
  CHECK(newest->label == 10);
  CHECK(refused.empty());
  CHECK(absl::IsNotFound(a->Read(99).status()));
}

TEST_CASE("restoring falls back past a corrupt, truncated or partial one") {
  const std::string dir = FreshDir("fallback");
  auto a = Open(dir, 0, 10), b = Open(dir, 1, 10);
  WriteBoth(*a, *b, 0, 0);
  WriteBoth(*a, *b, 10, 10);
  WriteBoth(*a, *b, 20, 20);
  WriteBoth(*a, *b, 30, 30);
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 40, 40)).ok());  // b died first

  // One flipped byte in shard 1's file of step 30.
  const std::string f30 = dir + "/step-30/shard-1-of-2.ckpt";
  std::string bytes = *ReadFileToString(f30);
  bytes[bytes.size() - 3] ^= 0x01;
  REQUIRE(WriteFileAtomically(f30, bytes).ok());
  // Shard 0's file of step 20 cut short.
  const std::string f20 = dir + "/step-20/shard-0-of-2.ckpt";
  bytes = *ReadFileToString(f20);
  REQUIRE(WriteFileAtomically(f20, bytes.substr(0, bytes.size() / 2)).ok());

  std::vector<std::string> refused;
  absl::StatusOr<ShardCheckpoint> c = b->ReadNewestComplete(&refused);
  REQUIRE(c.ok());
  CHECK(c->label == 10);
  REQUIRE(refused.size() == 3);
  CHECK_THAT(refused[0], Catch::Contains("step-40") &&
                             Catch::Contains("MANIFEST is missing"));
  CHECK_THAT(refused[1], Catch::Contains(f30) && Catch::Contains("corrupt"));
  CHECK_THAT(refused[2], Catch::Contains(f20) && Catch::Contains("truncated"));
}

TEST_CASE("files of another generation do not make a checkpoint complete") {
  const std::string dir = FreshDir("generations");
  auto a = Open(dir, 0), b = Open(dir, 1);
  // Shard 0's file of step 20 is from before a rollback (generation 1);
  // shard 1 reaches step 20 again in generation 2.
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 20, 20, 1)).ok());
  REQUIRE(b->Write(SmallCheckpoint(1, 2, 20, 20, 2)).ok());
  CHECK_FALSE(Exists(dir + "/step-20/MANIFEST"));
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 20, 20, 2)).ok());
  CHECK(Exists(dir + "/step-20/MANIFEST"));
  absl::StatusOr<ShardCheckpoint> c = a->Read(20);
  REQUIRE(c.ok());
  CHECK(c->generation == 2);
}

TEST_CASE(
    "a shard file that does not decode fails the write, by name; it "
    "does not look like a checkpoint in progress") {
  const std::string dir = FreshDir("undecodable");
  auto a = Open(dir, 0), b = Open(dir, 1);
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 30, 30)).ok());
  const std::string f0 = dir + "/step-30/shard-0-of-2.ckpt";
  {
    std::fstream f(f0, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  absl::Status s = b->Write(SmallCheckpoint(1, 2, 30, 30));
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("checkpoint step-30 cannot be completed") &&
                 Catch::Contains(f0));
  CHECK_FALSE(Exists(dir + "/step-30/MANIFEST"));
  CHECK_FALSE(b->IsMarkedComplete(30));
}

TEST_CASE(
    "a checkpoint of running statistics decodes: no optimizer keeps "
    "slots for them") {
  const std::string dir = FreshDir("statistics");
  auto a = CheckpointStore::Open({dir, "c", 0, 1, 3});
  REQUIRE(a.ok());
  ShardCheckpoint c = SmallCheckpoint(0, 1, 4, 4);
  auto layout = std::make_shared<VariableLayout>(*c.weights->layout);
  REQUIRE(layout->Add("mean", {3}, VariableKind::kRunningStatistic).ok());
  auto weights = std::make_shared<WeightsSnapshot>();
  weights->step = c.weights->step;
  for (const Tensor& t : c.weights->weights) {
    Tensor copy(t.shape());
    std::copy(t.data(), t.data() + t.size(), copy.data());
    weights->weights.push_back(std::move(copy));
  }
  Tensor mean({3});
  mean.data()[0] = 0.25f;
  weights->weights.push_back(std::move(mean));
  weights->layout = layout;
  c.weights = weights;
  for (auto& slot : c.optimizer.slots) slot.emplace_back();  // none
  REQUIRE((*a)->Write(c).ok());
  CHECK(Exists(dir + "/step-4/MANIFEST"));
  absl::StatusOr<ShardCheckpoint> back = (*a)->Read(4);
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  REQUIRE(back->weights->layout->size() == 3);
  CHECK(back->weights->layout->statistic[2]);
  CHECK(back->weights->weights[2].data()[0] == 0.25f);
  CHECK(back->optimizer.slots[0][2].empty());
}

TEST_CASE("old checkpoints are pruned and a rollback deletes later ones") {
  const std::string dir = FreshDir("prune");
  auto a = Open(dir, 0, 2), b = Open(dir, 1, 2);
  for (int64_t label : {0, 10, 20, 30}) WriteBoth(*a, *b, label, label);
  // Shard 1 completed step 30 and deleted its part of steps 0 and 10;
  // shard 0 deletes its own at its next write.
  CHECK_FALSE(Exists(dir + "/step-10/shard-1-of-2.ckpt"));
  CHECK_FALSE(Exists(dir + "/step-10/MANIFEST"));
  CHECK(Exists(dir + "/step-10/shard-0-of-2.ckpt"));

  // A later checkpoint only shard 0 wrote, and a killed writer's leftover.
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 40, 40)).ok());
  CHECK(a->Labels() == std::vector<int64_t>{20, 30, 40});
  std::ofstream(dir + "/step-40/shard-1-of-2.ckpt.tmp.999") << "partial";
  REQUIRE(a->DeleteNewerThan(30).ok());
  REQUIRE(b->DeleteNewerThan(30).ok());
  CHECK(a->Labels() == std::vector<int64_t>{20, 30});
  CHECK(b->Read(30).ok());
}

TEST_CASE("per host: a shard's own file is its complete checkpoint") {
  // Two directories, as on two hosts: neither sees the other's files.
  const std::string d0 = FreshDir("host0"), d1 = FreshDir("host1");
  auto open = [](const std::string& dir, int shard) {
    CheckpointStoreOptions o{dir, "c", shard, 2, /*keep=*/2};
    o.per_host = true;
    auto store = CheckpointStore::Open(o);
    REQUIRE(store.ok());
    return *std::move(store);
  };
  auto a = open(d0, 0), b = open(d1, 1);
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 10, 10)).ok());
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 20, 20, /*generation=*/2)).ok());
  REQUIRE(b->Write(SmallCheckpoint(1, 2, 10, 10)).ok());
  CHECK_FALSE(Exists(d0 + "/step-10/MANIFEST"));
  CHECK(a->ListComplete() ==
        std::vector<CompleteCheckpointInfo>{{20, 2, 20}, {10, 1, 10}});
  CHECK(b->ListComplete() == std::vector<CompleteCheckpointInfo>{{10, 1, 10}});
  absl::StatusOr<ShardCheckpoint> own = b->Read(10);
  REQUIRE(own.ok());
  CHECK(own->shard_index == 1);
  // A corrupt file is not complete, by name.
  {
    std::fstream f(d0 + "/step-20/shard-0-of-2.ckpt",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  CHECK(a->ListComplete() == std::vector<CompleteCheckpointInfo>{{10, 1, 10}});
  CHECK(a->Read(20).status().code() == absl::StatusCode::kDataLoss);
  // Pruning keeps this shard's newest `keep` files.
  REQUIRE(a->Write(SmallCheckpoint(0, 2, 30, 30, 2)).ok());
  CHECK_FALSE(Exists(d0 + "/step-10"));
  CHECK(Exists(d0 + "/step-20/shard-0-of-2.ckpt"));
}

TEST_CASE("the writer saves in order on its thread and counts failures") {
  const std::string dir = FreshDir("writer");
  CheckpointWriter a(Open(dir, 0)), b(Open(dir, 1));
  for (int64_t label : {0, 5}) {
    a.Save(
        std::make_unique<ShardCheckpoint>(SmallCheckpoint(0, 2, label, label)));
    b.Save(
        std::make_unique<ShardCheckpoint>(SmallCheckpoint(1, 2, label, label)));
  }
  a.DeleteNewerThan(0);
  a.Flush();
  b.Flush();
  CHECK(a.stats().written == 2);
  CHECK(a.stats().failed == 0);
  CHECK(a.stats().last_label == 5);
  absl::Status read0 = a.store().Read(0).status();
  INFO(read0.ToString());
  CHECK(read0.ok());
  // Step 5 lost shard 0's file to the rollback queued after it.
  CHECK(a.store().Read(5).status().code() == absl::StatusCode::kDataLoss);

  // Another shard's checkpoint is refused and counted.
  a.Save(std::make_unique<ShardCheckpoint>(SmallCheckpoint(1, 2, 9, 9)));
  a.Flush();
  CHECK(a.stats().failed == 1);
  CHECK_THAT(a.stats().last_error, Catch::Contains("given to the store of"));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
