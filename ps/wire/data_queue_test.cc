// The data queue's state through its message and its bytes: a queue
// restored from them is at the same position, in a new generation, and its
// old leases are void.
#include "ps/wire/data_queue.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

namespace psgd {
namespace ps {
namespace {

DataChunk MustLease(DataQueue& q, int worker) {
  absl::StatusOr<DataChunk> c = q.Lease(worker);
  REQUIRE(c.ok());
  return *std::move(c);
}

TEST_CASE("a data queue restored through the proto's bytes") {
  absl::StatusOr<DataQueue> made = DataQueue::Create({25, 4, 77});  // 7 chunks
  REQUIRE(made.ok());
  DataQueue q = *std::move(made);
  std::vector<DataChunk> held;
  for (int i = 0; i < 9; ++i) held.push_back(MustLease(q, i % 3));
  // Epoch 0: 0, 2 and 5 done, 1 returned; epoch 1: 0 and 1 out.
  for (int i : {0, 2, 5}) {
    REQUIRE(q.Done(i % 3, 0, i, held[i].lease).ok());
  }
  REQUIRE(q.Return(1, 0, 1, held[1].lease).ok());
  const DataQueueState state = q.Snapshot();

  ckpt::DataQueueState proto;
  DataQueueStateToProto(state, &proto);
  CHECK(proto.num_samples() == 25);
  CHECK(proto.chunk_size() == 4);
  CHECK(proto.seed() == 77);
  REQUIRE(proto.epochs_size() == 2);
  CHECK(std::vector<int64_t>(proto.epochs(0).outstanding().begin(),
                             proto.epochs(0).outstanding().end()) ==
        std::vector<int64_t>{1, 3, 4, 6});
  CHECK(proto.epochs(1).next_index() == 2);
  CHECK(proto.counters().leased() == 9);
  CHECK(proto.counters().done() == 3);
  CHECK(proto.counters().returned() == 1);
  std::string bytes;
  REQUIRE(proto.SerializeToString(&bytes));

  ckpt::DataQueueState parsed;
  REQUIRE(parsed.ParseFromString(bytes));
  const DataQueueState back = DataQueueStateFromProto(parsed);
  absl::StatusOr<DataQueue> restored = DataQueue::Restore(q.options(), back);
  REQUIRE(restored.ok());
  DataQueue& r = *restored;
  CHECK(r.generation() == 1);
  const DataQueuePosition p = r.Position();
  CHECK(p.epoch == 1);
  CHECK(p.chunks_done == 0);
  CHECK(p.chunks_in_epoch == 7);
  CHECK(p.chunks_queued == 6);  // epoch 0's 1, 3, 4, 6; epoch 1's 0, 1
  CHECK(p.chunks_out == 0);
  CHECK(r.counters().done == 3);
  // The same state again, but for the generation.
  DataQueueState again = r.Snapshot();
  CHECK(again.generation == 1);
  again.generation = 0;
  ckpt::DataQueueState again_proto;
  DataQueueStateToProto(again, &again_proto);
  CHECK(again_proto.SerializeAsString() == bytes);
  // Old leases are void; the chunks out at the snapshot come first.
  const absl::Status s = r.Done(0, 0, 3, held[3].lease);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  const DataChunk first = MustLease(r, 0);
  CHECK(first.epoch == 0);
  CHECK(first.index == 1);
  CHECK(first.samples == held[1].samples);
  CHECK(first.generation == 1);
}

TEST_CASE("a state of other options, through the proto, is refused") {
  absl::StatusOr<DataQueue> q = DataQueue::Create({25, 4, 77});
  REQUIRE(q.ok());
  ckpt::DataQueueState proto;
  DataQueueStateToProto(q->Snapshot(), &proto);
  proto.set_seed(78);
  const absl::Status s =
      DataQueue::Restore(q->options(), DataQueueStateFromProto(proto)).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("seed 78 differs from the options' 77"));
  // An empty message (a checkpoint without the queue) is refused too.
  CHECK(DataQueue::Restore(q->options(),
                           DataQueueStateFromProto(ckpt::DataQueueState()))
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
