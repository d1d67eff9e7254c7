#include "tests/fuzz/fuzz_input.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/dtype_convert.h"

namespace psgd {
namespace fuzz {
namespace {

constexpr size_t kHeaderBytes = 6;
constexpr size_t kLengthBytes = 3;
constexpr size_t kMaxLength = (size_t{1} << (8 * kLengthBytes)) - 1;

// Header byte 0.
constexpr uint8_t kAsyncBit = 1, kSgdBit = 2, kScaleLrBit = 4, kLeaseBit = 8;
// Header byte 2: a staleness bound when set (the low 3 bits), else none.
constexpr uint8_t kBoundBit = 0x80;
// Header byte 4: the wire dtypes (bits 0-1 gradients, 2-3 weights, each
// modulo 3), the data queue, the checkpoint directory.
constexpr uint8_t kDataQueueBit = 0x10, kCheckpointBit = 0x20;
// Header byte 5: data_epochs (bits 0-1), every_steps (bits 2-3),
// chunk_size - 1 (bits 4-6).

constexpr ps::DType kDTypes[] = {ps::DType::kFloat32, ps::DType::kBFloat16,
                                 ps::DType::kFloat16};

uint8_t DTypeIndex(ps::DType d) {
  return d == ps::DType::kBFloat16 ? 1 : d == ps::DType::kFloat16 ? 2 : 0;
}

void PutLength(size_t n, std::string* out) {
  for (size_t i = 0; i < kLengthBytes; ++i) {
    out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  }
}

}  // namespace

absl::string_view TakeLengthPrefixed(absl::string_view* bytes) {
  size_t n = 0;
  for (size_t i = 0; i < kLengthBytes && !bytes->empty(); ++i) {
    n |= size_t{static_cast<uint8_t>(bytes->front())} << (8 * i);
    bytes->remove_prefix(1);
  }
  n = std::min(n, bytes->size());
  const absl::string_view taken = bytes->substr(0, n);
  bytes->remove_prefix(n);
  return taken;
}

FuzzConfig FuzzConfig::Decode(const uint8_t h[6]) {
  FuzzConfig c;
  c.async = h[0] & kAsyncBit;
  c.sgd = h[0] & kSgdBit;
  c.scale_lr = c.async && (h[0] & kScaleLrBit);
  c.lease = h[0] & kLeaseBit;
  c.total_num_replicas = 1 + h[1] % 4;
  c.replicas_to_aggregate = c.async ? 1 : 1 + (h[1] / 4) % c.total_num_replicas;
  c.staleness_bound = c.async && (h[2] & kBoundBit) ? h[2] & 7 : -1;
  c.learning_rate_index = h[3] % 4;
  c.wire.gradients = kDTypes[(h[4] & 3) % 3];
  c.wire.weights = kDTypes[((h[4] >> 2) & 3) % 3];
  c.data_queue = h[4] & kDataQueueBit;
  c.checkpoints = h[4] & kCheckpointBit;
  c.data_epochs = h[5] & 3;
  c.every_steps = (h[5] >> 2) & 3;
  c.chunk_size = 1 + ((h[5] >> 4) & 7);
  return c;
}

std::string FuzzConfig::Encode() const {
  uint8_t h[kHeaderBytes] = {};
  h[0] = (async ? kAsyncBit : 0) | (sgd ? kSgdBit : 0) |
         (scale_lr ? kScaleLrBit : 0) | (lease ? kLeaseBit : 0);
  h[1] = static_cast<uint8_t>((total_num_replicas - 1) +
                              4 * (replicas_to_aggregate - 1));
  h[2] = staleness_bound >= 0 ? kBoundBit | staleness_bound : 0;
  h[3] = static_cast<uint8_t>(learning_rate_index);
  h[4] = static_cast<uint8_t>(
      DTypeIndex(wire.gradients) | DTypeIndex(wire.weights) << 2 |
      (data_queue ? kDataQueueBit : 0) | (checkpoints ? kCheckpointBit : 0));
  h[5] = static_cast<uint8_t>(data_epochs | every_steps << 2 |
                              (chunk_size - 1) << 4);
  return std::string(reinterpret_cast<const char*>(h), kHeaderBytes);
}

ps::ShardOptions FuzzConfig::ToShardOptions(
    const std::string& checkpoint_dir) const {
  ps::ShardOptions o;
  o.cluster_name = kCluster;
  o.mode = async ? ps::Mode::kAsync : ps::Mode::kSync;
  o.total_num_replicas = total_num_replicas;
  o.replicas_to_aggregate = replicas_to_aggregate;
  o.max_push_staleness = staleness_bound;  // the refusing limit, not SSP
  o.scale_lr_by_staleness = scale_lr;
  o.optimizer.kind = sgd ? ps::OptimizerOptions::Kind::kSgd
                         : ps::OptimizerOptions::Kind::kAdam;
  o.optimizer.learning_rate = kLearningRates[learning_rate_index];
  o.worker_lease = lease ? kLease : absl::ZeroDuration();
  o.data_queue_on = data_queue;
  o.data_queue = {kDataSamples, chunk_size, kDataSeed};
  o.data_epochs = data_epochs;
  if (checkpoints) {
    o.checkpoint.dir = checkpoint_dir;
    o.checkpoint.every_steps = every_steps;
    o.checkpoint.keep = kCheckpointKeep;
  }
  return o;
}

FuzzReader::FuzzReader(const uint8_t* data, size_t size)
    : p_(data + std::min(size, kHeaderBytes)), end_(data + size) {
  uint8_t header[kHeaderBytes] = {};
  std::copy(data, p_, header);
  config_ = FuzzConfig::Decode(header);
}

bool FuzzReader::Next(FuzzOp* op, absl::string_view* payload) {
  if (p_ == end_) return false;
  *op = static_cast<FuzzOp>(*p_++ % kNumOps);
  size_t length = 0;
  for (size_t i = 0; i < kLengthBytes && p_ != end_; ++i) {
    length |= size_t{*p_++} << (8 * i);
  }
  length = std::min(length, static_cast<size_t>(end_ - p_));
  *payload = absl::string_view(reinterpret_cast<const char*>(p_), length);
  p_ += length;
  return true;
}

FuzzInputWriter& FuzzInputWriter::Add(FuzzOp op, absl::string_view payload) {
  // Payloads over 16 MiB do not fit the format; the fuzzer never makes them.
  const size_t n = std::min(payload.size(), kMaxLength);
  bytes_.push_back(static_cast<char>(op));
  PutLength(n, &bytes_);
  bytes_.append(payload.data(), n);
  return *this;
}

FuzzInputWriter& FuzzInputWriter::SharedPush(
    absl::string_view segment, const ps::wire::PushRequest& push) {
  std::string payload;
  PutLength(segment.size(), &payload);
  payload.append(segment.data(), segment.size());
  payload += push.SerializeAsString();
  return Add(FuzzOp::kSharedPush, payload);
}

FuzzInputWriter& FuzzInputWriter::DecodePull(bool shared, int slices,
                                             absl::string_view segment,
                                             absl::string_view response) {
  std::string payload;
  payload.push_back(shared ? 1 : 0);
  payload.push_back(static_cast<char>(slices - 1));
  PutLength(segment.size(), &payload);
  payload.append(segment.data(), segment.size());
  payload.append(response.data(), response.size());
  return Add(FuzzOp::kDecodePull, payload);
}

FuzzInputWriter& FuzzInputWriter::DecodeCheckpoint(bool manifest, bool frame,
                                                   absl::string_view bytes) {
  std::string payload(1,
                      static_cast<char>((manifest ? 1 : 0) | (frame ? 2 : 0)));
  payload.append(bytes.data(), bytes.size());
  return Add(FuzzOp::kDecodeCheckpoint, payload);
}

ps::wire::TensorData Float32(const std::string& name,
                             const std::vector<int64_t>& shape,
                             const std::vector<float>& values) {
  ps::wire::TensorData t;
  t.mutable_spec()->set_name(name);
  t.mutable_spec()->mutable_shape()->Assign(shape.begin(), shape.end());
  t.set_dtype(ps::wire::DT_FLOAT32);
  t.set_data(reinterpret_cast<const char*>(values.data()),
             values.size() * sizeof(float));
  return t;
}

ps::wire::InitializeRequest InitializeRequest(
    const std::vector<ps::wire::TensorData>& variables) {
  ps::wire::InitializeRequest r;
  r.set_cluster(kCluster);
  for (const auto& v : variables) {
    ps::wire::TensorData* t = r.add_variables();
    *t = v;
    // The seeds' variables are trained parameters unless they say.
    if (t->spec().kind() == ps::wire::VARIABLE_KIND_UNSPECIFIED) {
      t->mutable_spec()->set_kind(ps::wire::PARAMETER);
    }
  }
  return r;
}

ps::wire::PushRequest PushRequest(
    int worker_id, int64_t step,
    const std::vector<ps::wire::TensorData>& gradients) {
  ps::wire::PushRequest r;
  r.set_cluster(kCluster);
  r.set_worker_id(worker_id);
  r.set_step(step);
  for (const auto& g : gradients) *r.add_gradients() = g;
  return r;
}

ps::wire::PullRequest PullRequest(int64_t min_step, int worker_id) {
  ps::wire::PullRequest r;
  r.set_cluster(kCluster);
  r.set_min_step(min_step);
  r.set_worker_id(worker_id);
  return r;
}

ps::wire::JoinRequest JoinRequest(int worker_id) {
  ps::wire::JoinRequest r;
  r.set_cluster(kCluster);
  r.set_worker_id(worker_id);
  return r;
}

ps::wire::LeaveRequest LeaveRequest(int worker_id) {
  ps::wire::LeaveRequest r;
  r.set_cluster(kCluster);
  r.set_worker_id(worker_id);
  return r;
}

ps::wire::StatusRequest StatusRequest() {
  ps::wire::StatusRequest r;
  r.set_cluster(kCluster);
  return r;
}

ps::wire::ShutdownRequest ShutdownRequest() {
  ps::wire::ShutdownRequest r;
  r.set_cluster(kCluster);
  r.set_reason("fuzz");
  return r;
}

ps::wire::LeaseDataRequest LeaseDataRequest(
    int worker_id, const ps::wire::DataChunkRef* give_back) {
  ps::wire::LeaseDataRequest r;
  r.set_cluster(kCluster);
  r.set_worker_id(worker_id);
  if (give_back != nullptr) *r.mutable_give_back() = *give_back;
  return r;
}

ps::wire::RollbackRequest RollbackRequest(int64_t label, int64_t generation) {
  ps::wire::RollbackRequest r;
  r.set_cluster(kCluster);
  r.set_label(label);
  r.set_generation(generation);
  return r;
}

ps::wire::CheckpointRequest CheckpointRequest(int64_t label, bool now) {
  ps::wire::CheckpointRequest r;
  r.set_cluster(kCluster);
  r.set_label(label);
  r.set_now(now);
  return r;
}

ps::wire::ListCheckpointsRequest ListCheckpointsRequest() {
  ps::wire::ListCheckpointsRequest r;
  r.set_cluster(kCluster);
  return r;
}

ps::wire::TensorData BFloat16(const std::string& name,
                              const std::vector<int64_t>& shape,
                              const std::vector<float>& values) {
  std::vector<uint16_t> h;
  for (float v : values) h.push_back(FloatToBFloat16Ref(v));
  ps::wire::TensorData t = Float32(name, shape, {});
  t.set_dtype(ps::wire::DT_BFLOAT16);
  t.set_data(reinterpret_cast<const char*>(h.data()), h.size() * 2);
  return t;
}

ps::wire::TensorData Float16(const std::string& name,
                             const std::vector<int64_t>& shape,
                             const std::vector<float>& values, float scale) {
  std::vector<uint16_t> h;
  for (float v : values) h.push_back(FloatToHalfRef(v * scale));
  ps::wire::TensorData t = Float32(name, shape, {});
  t.set_dtype(ps::wire::DT_FLOAT16);
  t.set_data(reinterpret_cast<const char*>(h.data()), h.size() * 2);
  t.set_scale(scale);
  return t;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadInputs(
    const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    for (const auto& entry : fs::directory_iterator(path, error)) {
      if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path, error)) {
    files.push_back(path);
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no fuzz inputs at '", path, "'"));
  }
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in.is_open()) {
      return absl::NotFoundError(absl::StrCat("cannot read '", file, "'"));
    }
    std::stringstream bytes;
    bytes << in.rdbuf();  // an empty file is an empty input
    inputs.emplace_back(file, bytes.str());
  }
  return inputs;
}

}  // namespace fuzz
}  // namespace psgd
