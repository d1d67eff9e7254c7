#include "tests/fuzz/seeds.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "common/file_io.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/shard/shard.h"
#include "tests/fuzz/fuzz_input.h"

namespace psgd {
namespace fuzz {
namespace {

using Tensors = std::vector<ps::wire::TensorData>;

// The model of every seed: w (2, 3) and b (2).
Tensors Model(float w, float b) {
  return {Float32("w", {2, 3}, std::vector<float>(6, w)),
          Float32("b", {2}, std::vector<float>(2, b))};
}

FuzzConfig Sync(int n, int m) {
  FuzzConfig c;
  c.total_num_replicas = m;
  c.replicas_to_aggregate = n;
  return c;
}

FuzzConfig Async(int bound, bool scale_lr) {
  FuzzConfig c;
  c.async = true;
  c.total_num_replicas = 3;
  c.staleness_bound = bound;
  c.scale_lr = scale_lr;
  return c;
}

// Initialize, then Join of workers 0..m-1.
FuzzInputWriter Started(const FuzzConfig& c) {
  FuzzInputWriter in(c);
  in.Add(FuzzOp::kInitialize, InitializeRequest(Model(0.5f, -1.0f)));
  for (int w = 0; w < c.total_num_replicas; ++w) {
    in.Add(FuzzOp::kJoin, JoinRequest(w));
  }
  return in;
}

std::string SyncRounds() {
  FuzzInputWriter in = Started(Sync(2, 2));
  in.Add(FuzzOp::kPull, PullRequest(0, 0))
      .Add(FuzzOp::kPull, PullRequest(1, 1))  // waits for step 1
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.2f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(-0.3f, 0.4f)))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.2f)))  // twice
      .Add(FuzzOp::kStatus, StatusRequest())
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(1.0f, 1.0f)))
      .Add(FuzzOp::kLeave, LeaveRequest(1))  // completes step 1
      .Add(FuzzOp::kPush, PushRequest(0, 2, Model(2.0f, -2.0f)))
      .Add(FuzzOp::kShutdown, ShutdownRequest())
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

std::string SyncBackupWorkers() {
  FuzzInputWriter in = Started(Sync(2, 3));
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(0.2f, 0.2f)))
      .Add(FuzzOp::kPush, PushRequest(2, 0, Model(0.3f, 0.3f)))  // surplus
      .Add(FuzzOp::kPush, PushRequest(2, 0, Model(0.3f, 0.3f)))  // twice
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(1, 1, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(0, 2, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(1, 2, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(2, 1, Model(0.3f, 0.3f)))  // stale
      .Add(FuzzOp::kPush, PushRequest(2, 3, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(0, 3, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(1, 3, Model(0.5f, 0.5f)))  // surplus
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

std::string AsyncStaleness() {
  FuzzConfig c = Async(1, true);
  c.sgd = true;
  FuzzInputWriter in = Started(c);
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(0.2f, 0.2f)))  // stale 1
      .Add(FuzzOp::kPush, PushRequest(2, 0, Model(0.3f, 0.3f)))  // bound
      .Add(FuzzOp::kPull, PushRequest(0, 5, {}))  // a push as a pull
      .Add(FuzzOp::kPull, PullRequest(4, 2))
      .Add(FuzzOp::kPush, PushRequest(2, 2, Model(0.3f, 0.3f)))
      .Add(FuzzOp::kPush, PushRequest(0, 3, Model(0.3f, 0.3f)))
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

std::string LeasesAndPulls() {
  FuzzConfig c = Sync(3, 3);
  c.lease = true;
  FuzzInputWriter in = Started(c);
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPull, PullRequest(1, 0))  // worker 0 waits: not expired
      .Add(FuzzOp::kPull, PullRequest(7, -1))
      .Byte(FuzzOp::kExpireWorkers, 0)
      .Byte(FuzzOp::kExpireWorkers, 32)  // 1 and 2 expire: step 1 completes
      .Add(FuzzOp::kPull, PullRequest(9, 1))
      .Byte(FuzzOp::kCancelPull, 1)
      .Add(FuzzOp::kJoin, JoinRequest(1))
      .Add(FuzzOp::kPull, PullRequest(3, -1))
      .Add(FuzzOp::kShutdown, ShutdownRequest())  // ends the waiting pulls
      .Add(FuzzOp::kJoin, JoinRequest(2))
      .Byte(FuzzOp::kExpireWorkers, 255);
  return in.bytes();
}

std::string PullsBeforeInitialize() {
  FuzzInputWriter in(Sync(1, 2));
  in.Add(FuzzOp::kPull, PullRequest(0, -1))
      .Add(FuzzOp::kPull, PullRequest(0, 1))
      .Add(FuzzOp::kJoin, JoinRequest(0))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(1.0f, 1.0f)))  // too early
      .Add(FuzzOp::kInitialize, InitializeRequest(Model(3.0f, 4.0f)))
      .Add(FuzzOp::kInitialize, InitializeRequest(Model(5.0f, 6.0f)))  // again
      .Add(FuzzOp::kInitialize,
           InitializeRequest({Float32("w", {3, 2}, std::vector<float>(6))}))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(1.0f, 1.0f)));
  return in.bytes();
}

// One refusal of each kind, on a started sync shard.
std::string Refusals() {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  FuzzInputWriter in = Started(Sync(2, 2));
  Tensors half = Model(0.1f, 0.1f);
  half[0].set_dtype(ps::wire::DT_FLOAT16);
  Tensors unspecified = Model(0.1f, 0.1f);
  unspecified[1].set_dtype(ps::wire::DATA_TYPE_UNSPECIFIED);
  Tensors short_data = Model(0.1f, 0.1f);
  short_data[0].mutable_data()->resize(23);
  Tensors nan = Model(0.1f, 0.1f);
  nan[1] = Float32("b", {2}, {0.0f, kNaN});
  Tensors inf = Model(0.1f, 0.1f);
  inf[0] = Float32("w", {2, 3}, {0, 0, 0, 0, 0, -kInf});
  Tensors wrong_shape = Model(0.1f, 0.1f);
  wrong_shape[0] = Float32("w", {3, 2}, std::vector<float>(6, 0.1f));
  Tensors unknown = Model(0.1f, 0.1f);
  unknown.push_back(Float32("u", {1}, {1.0f}));
  Tensors twice = Model(0.1f, 0.1f);
  twice[1] = Float32("w", {2, 3}, std::vector<float>(6, 0.1f));
  Tensors zero_dim = Model(0.1f, 0.1f);
  zero_dim[1] = Float32("b", {0, 2}, {});
  ps::wire::PushRequest other_cluster = PushRequest(0, 0, Model(0.1f, 0.1f));
  other_cluster.set_cluster("fuzzy");
  in.Add(FuzzOp::kPush, PushRequest(0, 0, half))
      .Add(FuzzOp::kPush, PushRequest(0, 0, unspecified))
      .Add(FuzzOp::kPush, PushRequest(0, 0, short_data))
      .Add(FuzzOp::kPush, PushRequest(0, 0, nan))
      .Add(FuzzOp::kPush, PushRequest(0, 0, inf))
      .Add(FuzzOp::kPush, PushRequest(0, 0, wrong_shape))
      .Add(FuzzOp::kPush, PushRequest(0, 0, unknown))
      .Add(FuzzOp::kPush, PushRequest(0, 0, twice))
      .Add(FuzzOp::kPush, PushRequest(0, 0, zero_dim))
      .Add(FuzzOp::kPush, PushRequest(0, 0, {Model(0.1f, 0.1f)[0]}))
      .Add(FuzzOp::kPush, other_cluster)
      .Add(FuzzOp::kPush, PushRequest(0, -1, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(0.1f, 0.1f)))  // future
      .Add(FuzzOp::kPush, PushRequest(5, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(-1, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPull, PullRequest(-3, 0))
      .Add(FuzzOp::kPull, PullRequest(0, 7))
      .Add(FuzzOp::kJoin, JoinRequest(2))
      .Add(FuzzOp::kLeave, LeaveRequest(-2))
      .Add(FuzzOp::kInitialize, InitializeRequest({Float32("", {1}, {1.0f})}))
      .Add(FuzzOp::kInitialize, InitializeRequest(nan))
      .Add(FuzzOp::kInitialize, InitializeRequest({}))
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(0))   // no data queue
      .Add(FuzzOp::kRollback, RollbackRequest(0, 2))  // no directory
      .Add(FuzzOp::kCheckpoint, CheckpointRequest(0, true))
      .Add(FuzzOp::kListCheckpoints, ListCheckpointsRequest())
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

// Gradients at and beyond the largest magnitude a shard takes
// (kMaxGradientMagnitude): those beyond once turned Adam's v to Inf and a
// sync sum to Inf (the fuzzer's first finding).
std::string LargeGradients() {
  FuzzInputWriter in = Started(Sync(2, 2));
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(3.0e38f, 1e20f)))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.2f, 2.9e32f)))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(1e18f, -1e18f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(1e18f, -1e18f)))
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(-1e18f, 1e18f)))
      .Add(FuzzOp::kPush, PushRequest(1, 1, Model(-1e18f, 1e18f)))
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

// Gradients in bfloat16 (the cluster's wire dtype), one push in float32
// (refused), one with a byte short; the client decoding a bfloat16 pull.
std::string WireBFloat16() {
  FuzzConfig c = Sync(2, 2);
  c.wire = {ps::DType::kBFloat16, ps::DType::kBFloat16};
  auto model = [](float w, float b) {
    return Tensors{BFloat16("w", {2, 3}, std::vector<float>(6, w)),
                   BFloat16("b", {2}, std::vector<float>(2, b))};
  };
  Tensors short_data = model(0.1f, 0.1f);
  short_data[1].mutable_data()->resize(3);
  ps::wire::PullResponse pulled;
  pulled.set_step(1);
  for (const auto& t : model(0.25f, -0.5f)) *pulled.add_variables() = t;
  FuzzInputWriter in = Started(c);
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.1f)))  // float32
      .Add(FuzzOp::kPush, PushRequest(0, 0, short_data))
      .Add(FuzzOp::kPush, PushRequest(0, 0, model(0.1f, 0.2f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, model(-3.0f, 1e-3f)))
      .Add(FuzzOp::kPull, PullRequest(1, 0))
      .DecodePull(false, 1, "", pulled.SerializeAsString())
      .DecodePull(false, 5, "", pulled.SerializeAsString())
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

// Gradients in float16 with a scale; without one, with 0 and with NaN
// (refused).
std::string WireFloat16() {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  FuzzConfig c = Async(-1, false);
  c.wire = {ps::DType::kFloat16, ps::DType::kFloat16};
  auto model = [](float w, float b, float scale) {
    return Tensors{Float16("w", {2, 3}, std::vector<float>(6, w), scale),
                   Float16("b", {2}, std::vector<float>(2, b), scale)};
  };
  Tensors no_scale = model(0.1f, 0.1f, 1.0f);
  no_scale[0].clear_scale();
  ps::wire::PullResponse pulled;
  pulled.set_step(2);
  for (const auto& t : model(0.25f, -0.5f, 64.0f)) *pulled.add_variables() = t;
  FuzzInputWriter in = Started(c);
  in.Add(FuzzOp::kPush, PushRequest(0, 0, model(0.1f, 0.2f, 1024.0f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, model(1e-5f, -2.0f, 65536.0f)))
      .Add(FuzzOp::kPush, PushRequest(2, 0, no_scale))
      .Add(FuzzOp::kPush, PushRequest(2, 0, model(0.1f, 0.1f, 0.0f)))
      .Add(FuzzOp::kPush, PushRequest(2, 0, model(0.1f, 0.1f, kNaN)))
      .Add(FuzzOp::kPush, PushRequest(2, 1, Model(0.1f, 0.1f)))  // float32
      .DecodePull(false, 2, "", pulled.SerializeAsString())
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

ps::wire::DataChunkRef Chunk(int64_t epoch, int64_t index, uint64_t lease) {
  ps::wire::DataChunkRef r;
  r.set_epoch(epoch);
  r.set_index(index);
  r.set_lease(lease);
  return r;
}

// The servers' data queue: 20 samples in chunks of 3 (7 chunks), one
// epoch; leases, pushes computed from them, a chunk given back, a leave
// that gives the worker's back, leases until the data ends.
std::string DataQueue() {
  FuzzConfig c = Sync(2, 3);
  c.data_queue = true;
  c.chunk_size = 3;
  c.data_epochs = 1;
  FuzzInputWriter in = Started(c);
  ps::wire::PushRequest p0 = PushRequest(0, 0, Model(0.1f, 0.1f));
  *p0.mutable_chunk() = Chunk(0, 0, 0);
  ps::wire::PushRequest p1 = PushRequest(1, 0, Model(0.2f, 0.2f));
  *p1.mutable_chunk() = Chunk(0, 1, 1);
  ps::wire::PushRequest p2 = PushRequest(2, 0, Model(0.2f, 0.2f));
  *p2.mutable_chunk() = Chunk(0, 2, 2);  // surplus: back to the queue
  const ps::wire::DataChunkRef given = Chunk(0, 2, 3);  // worker 0's 2nd
  in.Add(FuzzOp::kLeaseData, LeaseDataRequest(0))
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(1))
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(2))
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(7))  // no such worker
      .Add(FuzzOp::kPush, p0)
      .Add(FuzzOp::kPush, p1)
      .Add(FuzzOp::kPush, p2)
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(0))
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(0, &given))
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(0, &given))  // twice
      .Add(FuzzOp::kLeaseData, LeaseDataRequest(1, &given))  // not its own
      .Add(FuzzOp::kLeave, LeaveRequest(1));
  for (int i = 0; i < 8; ++i) {
    in.Add(FuzzOp::kLeaseData, LeaseDataRequest(2));  // until the data ends
  }
  in.Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

// Checkpoints every 2 steps and on request, listed; a rollback that ends a
// waiting pull, one repeated, one to a checkpoint that is not there, and
// Shutdown's save.
std::string Checkpoints() {
  FuzzConfig c = Sync(1, 2);
  c.checkpoints = true;
  c.every_steps = 2;
  FuzzInputWriter in = Started(c);
  ps::wire::PushRequest in_generation_2 = PushRequest(0, 2, Model(0.1f, 0.1f));
  in_generation_2.set_generation(2);
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.2f)))
      .Add(FuzzOp::kPush, PushRequest(1, 1, Model(0.3f, -0.2f)))  // saves 2
      .Add(FuzzOp::kCheckpoint, CheckpointRequest(1, true))
      .Add(FuzzOp::kCheckpoint, CheckpointRequest(3, false))
      .Add(FuzzOp::kCheckpoint, CheckpointRequest(-1, true))
      .Add(FuzzOp::kPush, PushRequest(0, 2, Model(0.5f, 0.5f)))  // saves 3
      .Add(FuzzOp::kListCheckpoints, ListCheckpointsRequest())
      .Add(FuzzOp::kPull, PullRequest(9, -1))  // waits
      .Add(FuzzOp::kRollback, RollbackRequest(2, 2))
      .Add(FuzzOp::kRollback, RollbackRequest(2, 2))  // again
      .Add(FuzzOp::kRollback, RollbackRequest(9, 3))  // not there
      .Add(FuzzOp::kRollback, RollbackRequest(0, 0))
      .Add(FuzzOp::kPush, in_generation_2)
      .Add(FuzzOp::kListCheckpoints, ListCheckpointsRequest())
      .Add(FuzzOp::kShutdown, ShutdownRequest())
      .Add(FuzzOp::kCheckpoint, CheckpointRequest(4, true))
      .Add(FuzzOp::kListCheckpoints, ListCheckpointsRequest());
  return in.bytes();
}

// A push whose gradients lie in a shared memory segment (after its 64-byte
// header), and the ways a request can name bytes outside it.
std::string SharedPush() {
  std::string segment(64, '\0');
  const std::vector<float> w(6, 0.25f), b(2, -0.5f);
  segment.append(reinterpret_cast<const char*>(w.data()), 24);
  segment.append(reinterpret_cast<const char*>(b.data()), 8);
  auto shared = [](Tensors t, int64_t w_offset, int64_t b_offset) {
    for (auto* g : {&t[0], &t[1]}) g->clear_data();
    t[0].mutable_shared()->set_offset(w_offset);
    t[0].mutable_shared()->set_size(24);
    t[1].mutable_shared()->set_offset(b_offset);
    t[1].mutable_shared()->set_size(8);
    return t;
  };
  Tensors both = shared(Model(0.1f, 0.1f), 64, 88);
  both[1].set_data(std::string(8, '\0'));
  FuzzInputWriter in = Started(Sync(2, 2));
  in.SharedPush(segment, PushRequest(0, 0, shared(Model(0, 0), 64, 88)))
      .SharedPush(segment, PushRequest(1, 0, shared(Model(0, 0), 0, 88)))
      .SharedPush(segment, PushRequest(1, 0, shared(Model(0, 0), 64, 90)))
      .SharedPush(segment, PushRequest(1, 0, both))
      .SharedPush("", PushRequest(1, 0, shared(Model(0, 0), 64, 88)))
      .SharedPush(segment, PushRequest(1, 0, Model(0.1f, 0.1f)))
      .SharedPush(segment, PushRequest(0, 1, shared(Model(0, 0), 88, 64)))
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

// The client decoding pulls: whole, in slices, through a shared segment,
// cut short, with a tensor twice and one it does not know.
std::string DecodePulls() {
  ps::wire::PullResponse r;
  r.set_step(4);
  r.set_generation(2);
  r.set_wait_micros(17);
  r.set_learning_rate(0.5);
  for (const auto& t : Model(0.75f, -1.5f)) *r.add_variables() = t;
  const std::string bytes = r.SerializeAsString();
  std::string segment(64, '\0');
  ps::wire::PullResponse in_segment = r;
  for (auto& t : *in_segment.mutable_variables()) {
    t.mutable_shared()->set_offset(static_cast<int64_t>(segment.size()));
    t.mutable_shared()->set_size(static_cast<int64_t>(t.data().size()));
    segment += t.data();
    t.clear_data();
  }
  ps::wire::PullResponse twice = r;
  *twice.add_variables() = r.variables(0);
  ps::wire::PullResponse unknown = r;
  *unknown.add_variables() = Float32("u", {1}, {1.0f});
  FuzzInputWriter in(Sync(1, 1));
  in.DecodePull(false, 1, "", bytes)
      .DecodePull(false, 8, "", bytes)
      .DecodePull(true, 3, segment, in_segment.SerializeAsString())
      .DecodePull(false, 1, "", in_segment.SerializeAsString())
      .DecodePull(false, 2, "", bytes.substr(0, bytes.size() - 5))
      .DecodePull(false, 1, "", twice.SerializeAsString())
      .DecodePull(false, 1, "", unknown.SerializeAsString());
  return in.bytes();
}

// A shard checkpoint of the seeds' model after Initialize (made by a shard,
// with a fixed save time, so that the bytes are the same every time).
std::string CheckpointBytes() {
  ps::ShardOptions o = FuzzConfig().ToShardOptions();
  auto shard = ps::ParameterShard::Create(o);
  if (!shard.ok()) return "";
  const std::vector<float> w(6, 0.5f), b(2, -1.0f);
  const std::vector<int64_t> w_shape = {2, 3}, b_shape = {2};
  const std::vector<ps::TensorBytes> variables = {
      ps::ParameterBytes("w", w_shape, w.data()),
      ps::ParameterBytes("b", b_shape, b.data())};
  if (!(*shard)->Initialize(variables).ok()) return "";
  ps::ShardCheckpoint c;
  c.cluster = kCluster;
  c.label = 3;
  c.mode = ps::Mode::kSync;
  c.saved = absl::FromUnixSeconds(1800000000);
  c.weights = (*shard)->LatestWeights();
  c.optimizer.kind = ps::OptimizerOptions::Kind::kAdam;
  c.optimizer.slot_names = {"m", "v"};
  c.optimizer.slots.resize(2);
  for (int i = 0; i < 2; ++i) {
    c.optimizer.slots[0].push_back((*shard)->CopySlot("m", i));
    c.optimizer.slots[1].push_back((*shard)->CopySlot("v", i));
  }
  c.last_push_step = {-1};
  return ps::EncodeShardCheckpoint(c);
}

std::string DecodeCheckpoints() {
  const std::string checkpoint = CheckpointBytes();
  ps::CheckpointManifest m;
  m.cluster = kCluster;
  m.label = 3;
  m.shards.push_back(
      {0, "shard-0-of-1.ckpt", static_cast<int64_t>(checkpoint.size()), 0, 0});
  const std::string manifest = ps::EncodeCheckpointManifest(m);
  // The framed payloads, for the op to frame again.
  absl::StatusOr<std::string> checkpoint_payload =
      UnframeChecksummed("PSGDCKPT", checkpoint, "seed");
  absl::StatusOr<std::string> manifest_payload =
      UnframeChecksummed("PSGDMANI", manifest, "seed");
  std::string corrupt = checkpoint;
  if (!corrupt.empty()) corrupt[corrupt.size() / 2] ^= 0x40;
  FuzzInputWriter in(Sync(1, 1));
  in.DecodeCheckpoint(false, false, checkpoint)
      .DecodeCheckpoint(false, true, checkpoint_payload.value_or(""))
      .DecodeCheckpoint(true, false, manifest)
      .DecodeCheckpoint(true, true, manifest_payload.value_or(""))
      .DecodeCheckpoint(false, false, corrupt)
      .DecodeCheckpoint(false, false, checkpoint.substr(0, 30));
  return in.bytes();
}

// An input near the 1 MiB that fuzz.sh lets libFuzzer make (the 3-byte
// length): a 240,000-byte variable, initialised, pushed as bytes and pushed
// through a shared segment, so that mutations of requests far beyond the
// old 64 KiB limit start from one.
std::string LargeModel() {
  constexpr int64_t kRows = 250, kColumns = 240;
  const std::vector<float> values(kRows * kColumns, 0.01f);
  const Tensors big = {Float32("big", {kRows, kColumns}, values)};
  FuzzConfig c = Sync(1, 1);
  c.sgd = true;
  FuzzInputWriter in(c);
  std::string segment(64, '\0');
  segment += big[0].data();
  Tensors shared = big;
  shared[0].clear_data();
  shared[0].mutable_shared()->set_offset(64);
  shared[0].mutable_shared()->set_size(kRows * kColumns * 4);
  in.Add(FuzzOp::kInitialize, InitializeRequest(big))
      .Add(FuzzOp::kJoin, JoinRequest(0))
      .Add(FuzzOp::kPush, PushRequest(0, 0, big))
      .SharedPush(segment, PushRequest(0, 1, shared))
      .Add(FuzzOp::kPull, PullRequest(2, 0));
  return in.bytes();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> SeedInputs() {
  return {
      {"seed_sync_rounds", SyncRounds()},
      {"seed_sync_backup_workers", SyncBackupWorkers()},
      {"seed_async_staleness", AsyncStaleness()},
      {"seed_leases_and_pulls", LeasesAndPulls()},
      {"seed_pulls_before_initialize", PullsBeforeInitialize()},
      {"seed_refusals", Refusals()},
      {"seed_large_gradients", LargeGradients()},
      {"seed_wire_bfloat16", WireBFloat16()},
      {"seed_wire_float16", WireFloat16()},
      {"seed_data_queue", DataQueue()},
      {"seed_checkpoints", Checkpoints()},
      {"seed_shared_push", SharedPush()},
      {"seed_decode_pulls", DecodePulls()},
      {"seed_decode_checkpoints", DecodeCheckpoints()},
      {"seed_large_model", LargeModel()},
  };
}

}  // namespace fuzz
}  // namespace psgd
