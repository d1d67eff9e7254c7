#include "ps/wire/wire.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psgd {
namespace ps {
namespace {

TEST_CASE("tensors convert both ways, reusing buffers") {
  const std::vector<int64_t> shape = {2, 2};
  std::vector<float> v = {1, 2, 3, 4};
  google::protobuf::RepeatedPtrField<wire::TensorData> protos;
  TensorBytesToProto({FloatTensorBytes("a", shape, v.data())}, &protos);
  REQUIRE(protos.size() == 1);
  const char* buffer = protos[0].data().data();
  TensorBytesToProto({FloatTensorBytes("b", shape, v.data())}, &protos);
  CHECK(protos[0].data().data() == buffer);  // same capacity, reused
  auto back = TensorBytesFromProto(protos);
  REQUIRE(back.ok());
  CHECK((*back)[0].name == "b");
  CHECK((*back)[0].dtype == DType::kFloat32);
  CHECK(std::vector<int64_t>((*back)[0].shape.begin(),
                             (*back)[0].shape.end()) == shape);
  CHECK((*back)[0].data.size() == 16);

  protos[0].set_dtype(wire::DT_BFLOAT16);
  CHECK((*TensorBytesFromProto(protos))[0].dtype == DType::kBFloat16);
  protos[0].set_dtype(wire::DATA_TYPE_UNSPECIFIED);
  absl::Status s = TensorBytesFromProto(protos).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "tensor 'b' has dtype 0, which is unspecified or unknown");
}

TEST_CASE("push replies and shard statuses round-trip") {
  PushReply reply{PushOutcome::kDroppedSurplus, "late", 7, 1};
  wire::PushResponse proto;
  PushReplyToProto(reply, &proto);
  auto back = PushReplyFromProto(proto);
  REQUIRE(back.ok());
  CHECK(back->outcome == PushOutcome::kDroppedSurplus);
  CHECK(back->reason == "late");
  CHECK(back->step == 7);
  proto.set_outcome(wire::PUSH_OUTCOME_UNSPECIFIED);
  CHECK(!PushReplyFromProto(proto).ok());

  ShardStatus s;
  s.cluster = "c";
  s.shard_index = 1;
  s.num_shards = 2;
  s.mode = Mode::kAsync;
  s.initialized = true;
  s.step = 9;
  s.counters.applied = 9;
  s.counters.refused_too_stale = 2;
  s.staleness_histogram = {{0, 4}, {3, 5}};
  s.live_workers = {0, 2};
  s.num_parameters = 100;
  wire::StatusResponse sp;
  ShardStatusToProto(s, &sp);
  ShardStatus t = ShardStatusFromProto(sp);
  CHECK(t.cluster == "c");
  CHECK(t.shard_index == 1);
  CHECK(t.mode == Mode::kAsync);
  CHECK(t.step == 9);
  CHECK(t.counters.applied == 9);
  CHECK(t.counters.refused_too_stale == 2);
  CHECK(t.staleness_histogram == s.staleness_histogram);
  CHECK(t.live_workers == s.live_workers);
  CHECK(t.num_parameters == 100);
  // Nothing restored or saved yet: -1, not 0 (step-0 is a checkpoint).
  CHECK(t.restored_label == -1);
  CHECK(t.last_checkpoint_label == -1);
}

TEST_CASE("checkpoint and rollback fields of a status round-trip") {
  ShardStatus s;
  s.generation = 3;
  s.awaiting_rollback = true;
  s.restored_label = 0;
  s.checkpoints_written = 7;
  s.checkpoint_failures = 1;
  s.last_checkpoint_label = 40;
  s.last_checkpoint_error = "disk full";
  s.rollbacks = {{2, 20, 27, 20}, {3, 40, 44, 40}};
  wire::StatusResponse sp;
  ShardStatusToProto(s, &sp);
  ShardStatus t = ShardStatusFromProto(sp);
  CHECK(t.generation == 3);
  CHECK(t.awaiting_rollback);
  CHECK(t.restored_label == 0);
  CHECK(t.checkpoints_written == 7);
  CHECK(t.checkpoint_failures == 1);
  CHECK(t.last_checkpoint_label == 40);
  CHECK(t.last_checkpoint_error == "disk full");
  CHECK(t.rollbacks == s.rollbacks);
  CHECK_FALSE(t.data_queue);
}

TEST_CASE("a data chunk's name and a lease's answer round-trip") {
  const DataChunkRef ref{3, 7, (uint64_t{2} << 40) | 9};
  wire::DataChunkRef rp;
  DataChunkRefToProto(ref, &rp);
  CHECK(DataChunkRefFromProto(rp) == ref);
  DataChunk chunk;
  chunk.epoch = 3;
  chunk.index = 7;
  chunk.lease = ref.lease;
  chunk.generation = 2;
  chunk.samples = {11, 4, 19};
  wire::LeaseDataResponse cp;
  DataChunkToProto(chunk, &cp);
  const DataChunk back = DataChunkFromProto(cp);
  CHECK(back.epoch == 3);
  CHECK(back.index == 7);
  CHECK(back.lease == ref.lease);
  CHECK(back.generation == 2);
  CHECK(back.samples == chunk.samples);
}

TEST_CASE("the data queue's fields of a status round-trip") {
  ShardStatus s;
  s.data_queue = true;
  s.data_epoch = 3;
  s.data_chunks_done = 4;
  s.data_chunks_per_epoch = 30;
  s.data_chunks_out = 2;
  s.data_chunks_queued = 1;
  s.data_counters.leased = 99;
  s.data_counters.done = 94;
  s.data_counters.returned = 3;
  s.data_counters.epochs_completed = 3;
  wire::StatusResponse sp;
  ShardStatusToProto(s, &sp);
  ShardStatus t = ShardStatusFromProto(sp);
  CHECK(t.data_queue);
  CHECK(t.data_epoch == 3);
  CHECK(t.data_chunks_done == 4);
  CHECK(t.data_chunks_per_epoch == 30);
  CHECK(t.data_chunks_out == 2);
  CHECK(t.data_chunks_queued == 1);
  CHECK(t.data_counters.leased == 99);
  CHECK(t.data_counters.done == 94);
  CHECK(t.data_counters.returned == 3);
  CHECK(t.data_counters.epochs_completed == 3);
}

// Every field of a decision, for a failure that shows which differs.
std::string Describe(const Decision& d) {
  std::string s = absl::StrCat(
      "seq ", d.seq, " ", DecisionKindName(d.kind), " step ", d.step,
      " workers [", absl::StrJoin(d.workers, ","), "] push_ids [",
      absl::StrJoin(d.push_ids, ","), "] lr_scale ", d.lr_scale, " staleness ",
      d.staleness, " dropped ", static_cast<int>(d.dropped), " replicas_next ",
      d.replicas_next, " chunks");
  for (const DecidedChunk& c : d.chunks) {
    absl::StrAppend(&s, " {", c.worker, " ", c.chunk.epoch, "/", c.chunk.index,
                    "/", c.chunk.lease, " [", absl::StrJoin(c.samples, ","),
                    "] ", c.ledger_generation, "}");
  }
  return s;
}

// C++ -> proto -> bytes -> proto -> C++.
Decision RoundTrip(const Decision& d) {
  wire::Decision sent;
  DecisionToProto(d, &sent);
  wire::Decision received;
  REQUIRE(received.ParseFromString(sent.SerializeAsString()));
  absl::StatusOr<Decision> back = DecisionFromProto(received);
  REQUIRE(back.ok());
  return *back;
}

DecidedChunk Chunk(int worker, int64_t index) {
  DecidedChunk c;
  c.worker = worker;
  c.chunk = DataChunkRef{2, index, (uint64_t{1} << 40) | 5};
  c.samples = {index * 10, index * 10 + 3};
  c.ledger_generation = 4;
  return c;
}

TEST_CASE("every kind of decision round-trips through its bytes") {
  // Each as shard 0 makes it (ps/shard/shard.cc).
  std::vector<Decision> decisions;
  Decision sync;
  sync.seq = 12;
  sync.kind = Decision::Kind::kSyncStep;
  sync.step = 7;
  sync.workers = {3, 0, 2};
  sync.push_ids = {uint64_t{1} << 63 | 1, 2, 99};
  sync.lr_scale = 0.75;
  sync.replicas_next = 3;
  sync.chunks = {Chunk(3, 1), Chunk(0, 2), Chunk(2, 8)};
  decisions.push_back(sync);
  Decision sync_bare = sync;  // no chunks, N not chosen
  sync_bare.chunks.clear();
  sync_bare.replicas_next = 0;
  decisions.push_back(sync_bare);
  Decision async;
  async.seq = 13;
  async.kind = Decision::Kind::kAsyncPush;
  async.step = 40;
  async.workers = {5};
  async.push_ids = {17};
  async.lr_scale = 0.25;
  async.staleness = 3;
  async.chunks = {Chunk(5, 6)};
  decisions.push_back(async);
  Decision async_bare = async;
  async_bare.chunks.clear();
  decisions.push_back(async_bare);
  Decision left;
  left.seq = 14;
  left.kind = Decision::Kind::kLeft;
  left.step = 41;
  left.workers = {1};
  left.push_ids = {0};
  decisions.push_back(left);
  for (Decision::Dropped reason :
       {Decision::Dropped::kStale, Decision::Dropped::kSurplus,
        Decision::Dropped::kRefused, Decision::Dropped::kRefusedTooStale}) {
    Decision dropped;
    dropped.seq = 15;
    dropped.kind = Decision::Kind::kDropped;
    dropped.step = 39;
    dropped.workers = {2};
    dropped.push_ids = {8};
    dropped.dropped = reason;
    decisions.push_back(dropped);
  }
  for (const Decision& d : decisions) {
    CAPTURE(Describe(d));
    CHECK(Describe(RoundTrip(d)) == Describe(d));
  }
}

TEST_CASE(
    "a decision of no kind, or of an unknown dropped reason, is refused") {
  wire::Decision p;
  p.set_seq(9);
  absl::Status s = DecisionFromProto(p).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "decision 9 has no kind this build knows (sync_step, async_push, left "
        "or dropped): its kind is unset");
  // A kind of a newer build (a oneof field this one does not know) parses
  // as an unknown field: no kind.
  std::string newer = p.SerializeAsString();
  newer += std::string("\x4a\x02\x08\x01", 4);  // field 9: {1: 1}
  wire::Decision parsed;
  REQUIRE(parsed.ParseFromString(newer));
  CHECK(DecisionFromProto(parsed).status().message() == s.message());

  p.mutable_dropped()->set_step(4);
  s = DecisionFromProto(p).status();  // REASON_UNSPECIFIED
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "decision 9 (dropped, step 4): reason 0 is unspecified or unknown");
  p.mutable_dropped()->set_reason(
      static_cast<wire::Decision::Dropped::Reason>(77));
  CHECK(DecisionFromProto(p).status().message() ==
        "decision 9 (dropped, step 4): reason 77 is unspecified or unknown");
}

}  // namespace
}  // namespace ps
}  // namespace psgd
