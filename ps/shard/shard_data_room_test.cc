// ShardDataRoom: the queue's leases, the ledger lines of applied chunks
// with and without the queue, and the queue and the ledger's length in a
// checkpoint. Who may lease is ParameterShard's (shard_data_test.cc).
#include "ps/shard/shard_data_room.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ps/testing/checkpoint_test_util.h"

namespace psgd {
namespace ps {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ShardOptions QueueOptions() {
  ShardOptions o;
  o.data_queue_on = true;
  o.data_queue.num_samples = 8;
  o.data_queue.chunk_size = 2;
  o.data_queue.seed = 7;
  return o;
}

TEST_CASE("a room without the queue refuses leases and writes the ledger") {
  const ShardOptions options;
  ShardDataRoom room(options, "shard 1");
  const absl::Status s = room.CheckQueue();
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message() ==
        "this shard hands out no data (the servers hand it out from shard 0 "
        "with data { sharding: SERVERS } in the config)");
  CHECK(room.leases() == nullptr);
  CHECK_FALSE(room.Position().has_value());
  CHECK_FALSE(room.has_ledger());
  room.Gone(0);  // nothing to give back

  const std::string path = testing::FreshDir("ledger_only") + ".jsonl";
  absl::StatusOr<std::unique_ptr<Ledger>> ledger = Ledger::Open(path, "s1");
  REQUIRE(ledger.ok());
  room.set_ledger(ledger->get());
  CHECK(room.has_ledger());
  DecidedChunk c;
  c.worker = 2;
  c.chunk.epoch = 0;
  c.chunk.index = 3;
  c.samples = {6, 7};
  c.ledger_generation = 1;
  room.Applied(/*step=*/5, {c});
  ShardCheckpoint saved;
  room.Save(&saved);
  const std::string line = FormatLedgerLine(2, 5, 1, 0, 3, c.samples) + "\n";
  CHECK(ReadFile(path) == line);
  CHECK(saved.ledger_bytes == static_cast<int64_t>(line.size()));
  CHECK_FALSE(saved.data_queue.has_value());

  // A restore cuts the lines written since the checkpoint.
  room.Applied(6, {c});
  absl::StatusOr<std::optional<DataQueue>> queue = room.QueueOf(saved);
  REQUIRE(queue.ok());
  CHECK_FALSE(queue->has_value());
  room.Install(*std::move(queue), saved);
  CHECK(ReadFile(path) == line);
}

TEST_CASE("the queue's leases, position and checkpoint") {
  const ShardOptions options = QueueOptions();
  ShardDataRoom room(options, "shard 0");
  REQUIRE(room.OpenQueue().ok());
  REQUIRE(room.CheckQueue().ok());
  REQUIRE(room.leases() != nullptr);
  auto pulling = [] { return std::set<int>(); };
  absl::StatusOr<DataChunk> a = room.Lease(0, nullptr, 0, pulling);
  REQUIRE(a.ok());
  CHECK(a->samples.size() == 2);
  CHECK(room.Position()->chunks_out == 1);
  CHECK(room.Position()->chunks_in_epoch == 4);

  ShardCheckpoint saved;
  room.Save(&saved);
  REQUIRE(saved.data_queue.has_value());
  CHECK(saved.ledger_bytes == -1);  // no ledger

  // The worker left: its chunk is back in the queue.
  room.Gone(0);
  CHECK(room.Position()->chunks_out == 0);
  CHECK(room.Position()->chunks_queued == 1);

  // A checkpoint without a queue (of a run whose workers read the data)
  // starts the data at epoch 0; this one's, where it was, nothing out.
  ShardCheckpoint without;
  absl::StatusOr<std::optional<DataQueue>> fresh = room.QueueOf(without);
  REQUIRE(fresh.ok());
  REQUIRE(fresh->has_value());
  absl::StatusOr<std::optional<DataQueue>> restored = room.QueueOf(saved);
  REQUIRE(restored.ok());
  room.Install(*std::move(restored), saved);
  CHECK(room.Position()->chunks_out == 0);
  CHECK(room.Position()->epoch == 0);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
