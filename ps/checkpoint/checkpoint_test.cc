// The checkpoint format: every field survives a round trip; a corrupt,
// truncated or mislabelled file is refused with DATA_LOSS naming the file and
// the reason; the manifest likewise.
#include "ps/checkpoint/checkpoint.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "common/file_io.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/checkpoint.pb.h"
#include "ps/testing/checkpoint_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::SmallCheckpoint;

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data(), t.data() + t.size());
}

TEST_CASE("a shard checkpoint survives encoding and decoding whole") {
  const ShardCheckpoint c = SmallCheckpoint(1, 2, 40, 41, 3);
  absl::StatusOr<ShardCheckpoint> d =
      DecodeShardCheckpoint(EncodeShardCheckpoint(c), "f");
  REQUIRE(d.ok());
  CHECK(d->cluster == "c");
  CHECK(d->shard_index == 1);
  CHECK(d->num_shards == 2);
  CHECK(d->label == 40);
  CHECK(d->generation == 3);
  CHECK(d->mode == Mode::kSync);
  CHECK(d->total_num_replicas == 3);
  CHECK(d->saved == c.saved);
  CHECK(d->step == 41);
  REQUIRE(d->weights->layout->names == c.weights->layout->names);
  CHECK(d->weights->layout->shapes == c.weights->layout->shapes);
  CHECK(d->weights->layout->kinds == c.weights->layout->kinds);
  CHECK(d->weights->layout->slices == c.weights->layout->slices);
  CHECK(d->weights->step == 41);
  for (int i = 0; i < 2; ++i) {
    CHECK(Values(d->weights->weights[i]) == Values(c.weights->weights[i]));
  }
  CHECK(d->optimizer.kind == OptimizerOptions::Kind::kAdam);
  CHECK(d->optimizer.step == 41);
  CHECK(d->optimizer.slot_names == c.optimizer.slot_names);
  CHECK(d->optimizer.slots == c.optimizer.slots);
  CHECK(d->last_push_step == c.last_push_step);
  CHECK(d->live_workers == c.live_workers);
  CHECK(d->counters.aggregated == 4);
  CHECK(d->counters.applied == 41);
  CHECK(d->counters.dropped_surplus == 1);
  CHECK(d->staleness_histogram == c.staleness_histogram);
  CHECK(d->workers_expired == 1);
  CHECK(d->rollbacks == c.rollbacks);
}

TEST_CASE("a corrupt or truncated checkpoint is refused naming the file") {
  const std::string bytes = EncodeShardCheckpoint(SmallCheckpoint(0, 1, 5, 5));
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  absl::Status s = DecodeShardCheckpoint(flipped, "step-5/x.ckpt").status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("step-5/x.ckpt"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("checksum"));

  s = DecodeShardCheckpoint(bytes.substr(0, bytes.size() - 7), "t").status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::StartsWith("t"));

  s = DecodeShardCheckpoint("", "empty").status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  // A manifest is not a shard checkpoint (the magic differs).
  CheckpointManifest m;
  m.shards = {{0, "shard-0-of-1.ckpt", 10, 1, 5}};
  s = DecodeShardCheckpoint(EncodeCheckpointManifest(m), "m").status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("checkpoint contents that do not fit together are refused") {
  ShardCheckpoint c = SmallCheckpoint(0, 1, 5, 5);
  c.last_push_step = {1, 2};  // 3 workers
  absl::Status s =
      DecodeShardCheckpoint(EncodeShardCheckpoint(c), "f").status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("last push steps"));

  c = SmallCheckpoint(0, 1, 5, 5);
  c.optimizer.slots[1].pop_back();  // v of one variable only
  s = DecodeShardCheckpoint(EncodeShardCheckpoint(c), "f").status();
  CHECK_THAT(std::string(s.message()), Catch::Contains("slot 'v'"));

  c = SmallCheckpoint(0, 1, 5, 5);
  c.last_push_step[0] = 5;  // the pending step's pushes are not saved
  s = DecodeShardCheckpoint(EncodeShardCheckpoint(c), "f").status();
  CHECK_THAT(std::string(s.message()), Catch::Contains("last push step of 5"));
}

TEST_CASE("each variable's kind and slice survive; nothing reads a name") {
  ShardCheckpoint c = SmallCheckpoint(0, 1, 5, 5);
  auto layout = std::make_shared<VariableLayout>();
  // Named as a parameter would be, yet a statistic; a slice named as a
  // whole variable would be, yet part 1 of "big" from row 4.
  REQUIRE(layout->Add("w", {2, 3}, VariableKind::kRunningStatistic).ok());
  REQUIRE(layout->Add("b", {2}, VariableKind::kParameter, SliceOf{"big", 1, 4})
              .ok());
  auto weights = std::make_shared<WeightsSnapshot>();
  weights->step = c.weights->step;
  for (const Tensor& t : c.weights->weights) {
    Tensor copy(t.shape());
    std::copy(t.data(), t.data() + t.size(), copy.data());
    weights->weights.push_back(std::move(copy));
  }
  weights->layout = layout;
  c.weights = weights;
  c.optimizer.slots[0][0].clear();  // no slots for a statistic
  c.optimizer.slots[1][0].clear();
  absl::StatusOr<ShardCheckpoint> d =
      DecodeShardCheckpoint(EncodeShardCheckpoint(c), "f");
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  const VariableLayout& back = *d->weights->layout;
  CHECK(back.kinds[0] == VariableKind::kRunningStatistic);
  CHECK(back.statistic[0]);
  CHECK(back.kinds[1] == VariableKind::kParameter);
  REQUIRE(back.slices[1].has_value());
  CHECK(*back.slices[1] == (SliceOf{"big", 1, 4}));
  CHECK(back.VariableNames() == std::vector<std::string>{"w", "big"});
}

// The fuzzer's finding 3 (docs/RELIABILITY.md, "Fuzzing"): decoding an empty
// slot copied 0 bytes into an empty vector's null data(), undefined
// behaviour that clang's UBSan reports (--config=fuzz; gcc's does not).
TEST_CASE("empty slots decode as empty, with nothing copied") {
  ShardCheckpoint c = SmallCheckpoint(0, 1, 5, 5);
  c.optimizer.slots[0][1].clear();
  c.optimizer.slots[1][1].clear();
  auto layout = std::make_shared<VariableLayout>(*c.weights->layout);
  layout->kinds[1] = VariableKind::kRunningStatistic;
  layout->statistic[1] = true;
  ++layout->num_statistics;
  auto weights = std::make_shared<WeightsSnapshot>();
  weights->step = c.weights->step;
  for (const Tensor& t : c.weights->weights) {
    Tensor copy(t.shape());
    std::copy(t.data(), t.data() + t.size(), copy.data());
    weights->weights.push_back(std::move(copy));
  }
  weights->layout = layout;
  c.weights = weights;
  absl::StatusOr<ShardCheckpoint> d =
      DecodeShardCheckpoint(EncodeShardCheckpoint(c), "f");
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  REQUIRE(d->optimizer.slots.size() == 2);
  CHECK(d->optimizer.slots[0][1].empty());
  CHECK(d->optimizer.slots[1][1].empty());
  CHECK(d->optimizer.slots[0][0] == c.optimizer.slots[0][0]);
}

TEST_CASE("a checkpoint of format version 1 is refused naming the version") {
  const std::string bytes = EncodeShardCheckpoint(SmallCheckpoint(0, 1, 5, 5));
  absl::StatusOr<std::string> payload =
      UnframeChecksummed("PSGDCKPT", bytes, "f");
  REQUIRE(payload.ok());
  ckpt::ShardCheckpoint p;
  REQUIRE(p.ParseFromString(*payload));
  p.set_format_version(1);  // as written before variables had kinds
  for (ckpt::Tensor& t : *p.mutable_variables()) t.mutable_spec()->clear_kind();
  absl::Status s =
      DecodeShardCheckpoint(FrameChecksummed("PSGDCKPT", p.SerializeAsString()),
                            "step-5/shard-0-of-1.ckpt")
          .status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("step-5/shard-0-of-1.ckpt") &&
                 Catch::Contains("format version 1") &&
                 Catch::Contains("reads version 3") &&
                 Catch::Contains("3d57e42"));
  // A version-3 file whose variable has no kind is corrupt.
  p.set_format_version(3);
  s = DecodeShardCheckpoint(FrameChecksummed("PSGDCKPT", p.SerializeAsString()),
                            "g")
          .status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("no known kind"));
}

// Field by field as format version 2 wrote a checkpoint (commit 2c0c35f):
// its own Tensor fields, the mode and optimizer as text.
std::string Version2File() {
  std::string tensor;
  {
    google::protobuf::io::StringOutputStream raw(&tensor);
    google::protobuf::io::CodedOutputStream out(&raw);
    out.WriteTag(1 << 3 | 2);  // name
    out.WriteVarint32(1);
    out.WriteString("w");
    out.WriteTag(2 << 3 | 2);  // shape, packed
    out.WriteVarint32(1);
    out.WriteVarint32(2);
    out.WriteTag(3 << 3 | 2);  // data
    out.WriteVarint32(8);
    out.WriteString(std::string(8, '\0'));
    out.WriteTag(4 << 3 | 0);  // kind: PARAMETER
    out.WriteVarint32(1);
  }
  std::string file;
  {
    google::protobuf::io::StringOutputStream raw(&file);
    google::protobuf::io::CodedOutputStream out(&raw);
    out.WriteTag(1 << 3 | 0);  // format_version
    out.WriteVarint32(2);
    out.WriteTag(2 << 3 | 2);  // cluster
    out.WriteVarint32(1);
    out.WriteString("c");
    out.WriteTag(6 << 3 | 0);  // generation
    out.WriteVarint32(1);
    out.WriteTag(7 << 3 | 2);  // mode
    out.WriteVarint32(4);
    out.WriteString("sync");
    out.WriteTag(8 << 3 | 2);  // optimizer
    out.WriteVarint32(4);
    out.WriteString("adam");
    out.WriteTag(11 << 3 | 2);  // variables
    out.WriteVarint32(static_cast<uint32_t>(tensor.size()));
    out.WriteString(tensor);
  }
  return FrameChecksummed("PSGDCKPT", file);
}

TEST_CASE("a format version 2 file is refused by its version and commit") {
  absl::Status s =
      DecodeShardCheckpoint(Version2File(), "step-5/shard-0-of-1.ckpt")
          .status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("step-5/shard-0-of-1.ckpt") &&
                 Catch::Contains("format version 2") &&
                 Catch::Contains("reads version 3") &&
                 Catch::Contains("2c0c35f"));
}

TEST_CASE("a mode or optimizer this build does not know is corrupt") {
  const std::string bytes = EncodeShardCheckpoint(SmallCheckpoint(0, 1, 5, 5));
  absl::StatusOr<std::string> payload =
      UnframeChecksummed("PSGDCKPT", bytes, "f");
  REQUIRE(payload.ok());
  ckpt::ShardCheckpoint p;
  REQUIRE(p.ParseFromString(*payload));
  ckpt::ShardCheckpoint no_mode = p;
  no_mode.clear_mode();
  absl::Status s =
      DecodeShardCheckpoint(
          FrameChecksummed("PSGDCKPT", no_mode.SerializeAsString()), "f")
          .status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("training mode 0"));
  ckpt::ShardCheckpoint odd_optimizer = p;
  odd_optimizer.set_optimizer(static_cast<wire::OptimizerKind>(9));
  s = DecodeShardCheckpoint(
          FrameChecksummed("PSGDCKPT", odd_optimizer.SerializeAsString()), "f")
          .status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("optimizer 9"));
}

TEST_CASE("a shape of 2^38 floats with 4 bytes is refused before allocating") {
  const std::string bytes = EncodeShardCheckpoint(SmallCheckpoint(0, 1, 5, 5));
  absl::StatusOr<std::string> payload =
      UnframeChecksummed("PSGDCKPT", bytes, "f");
  REQUIRE(payload.ok());
  ckpt::ShardCheckpoint p;
  REQUIRE(p.ParseFromString(*payload));
  ckpt::Tensor& t = *p.mutable_variables(0);
  t.mutable_spec()->clear_shape();
  t.mutable_spec()->add_shape(int64_t{1} << 19);
  t.mutable_spec()->add_shape(int64_t{1} << 19);  // 1 TiB, were it allocated
  t.set_data(std::string(4, '\0'));
  absl::Status s = DecodeShardCheckpoint(
                       FrameChecksummed("PSGDCKPT", p.SerializeAsString()), "h")
                       .status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("has 4 bytes"));
}

TEST_CASE("a manifest survives a round trip and must list every shard") {
  CheckpointManifest m;
  m.cluster = "c";
  m.label = 20;
  m.generation = 2;
  m.num_shards = 2;
  m.shards = {{0, "shard-0-of-2.ckpt", 100, 7, 20},
              {1, "shard-1-of-2.ckpt", 101, 8, 21}};
  absl::StatusOr<CheckpointManifest> d =
      DecodeCheckpointManifest(EncodeCheckpointManifest(m), "MANIFEST");
  REQUIRE(d.ok());
  CHECK(d->label == 20);
  CHECK(d->generation == 2);
  REQUIRE(d->shards.size() == 2);
  CHECK(d->shards[1].file == "shard-1-of-2.ckpt");
  CHECK(d->shards[1].bytes == 101);
  CHECK(d->shards[1].crc32c == 8);
  CHECK(d->shards[1].step == 21);

  m.shards.pop_back();
  absl::Status s =
      DecodeCheckpointManifest(EncodeCheckpointManifest(m), "MANIFEST")
          .status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("1 entries for 2"));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
