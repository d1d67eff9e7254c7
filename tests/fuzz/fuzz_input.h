// The input format of the shard fuzzer (tests/fuzz/shard_fuzz.h): a header
// that chooses the shard's options, then a sequence of requests. Every byte
// string is a valid input (missing bytes read as zero, a truncated payload
// is what is left), so libFuzzer can mutate freely; FuzzInputWriter builds
// inputs on purpose (the seed corpus, regression tests).
//
//   header   6 bytes   options (FuzzConfig::Decode)
//   request  1 byte    FuzzOp (the byte modulo kNumOps)
//            3 bytes   payload length, little-endian (up to 16 MiB, so that
//                      libFuzzer's 1 MiB inputs fit in one request)
//            n bytes   payload: a serialised request of proto/ps.proto for
//                      the RPCs, a byte for kExpireWorkers and kCancelPull,
//                      raw bytes with a few bytes of framing for the ops
//                      that decode (see FuzzOp)
//
// (Until 2026-11 the header was 4 bytes and the length 2: the reproducers
// of that time in corpus/ were rewritten into this format, meaning for
// meaning.)
//
// Thread-safety: plain values and pure functions.
#ifndef PSGD_TESTS_FUZZ_FUZZ_INPUT_H_
#define PSGD_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "proto/ps.pb.h"
#include "ps/state/options.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace fuzz {

// The cluster name of every fuzzed shard.
inline constexpr char kCluster[] = "fuzz";

enum class FuzzOp : uint8_t {
  kInitialize = 0,     // payload: InitializeRequest
  kPull = 1,           // PullRequest; a pull that waits stays registered
  kPush = 2,           // PushRequest
  kJoin = 3,           // JoinRequest
  kLeave = 4,          // LeaveRequest
  kStatus = 5,         // StatusRequest
  kShutdown = 6,       // ShutdownRequest
  kExpireWorkers = 7,  // byte k: ExpireWorkers(now + k/16 leases)
  kCancelPull = 8,     // byte k: withdraws waiting pull k (modulo their count)
  kLeaseData = 9,      // LeaseDataRequest
  kRollback = 10,      // RollbackRequest
  kCheckpoint = 11,    // CheckpointRequest
  kListCheckpoints = 12,  // ListCheckpointsRequest
  // A push through shared memory: 3 bytes (little-endian) n, n bytes of a
  // fake segment, then a PushRequest whose gradients may name offsets in
  // it (TensorData.shared).
  kSharedPush = 13,
  // The client's decoding of a pull (DecodePullResponse into a
  // ShardAssembler of the seeds' model, ps/client/model_slices.h): a flag
  // byte (bit 0: with a shared segment), a byte k (the response comes in
  // 1 + k % 8 gRPC slices), 3 bytes n and n bytes of the segment, then
  // the PullResponse's bytes. The assembler's dtype is the header's
  // wire.weights.
  kDecodePull = 14,
  // Checkpoint decoding (ps/checkpoint/checkpoint.h): a flag byte (bit 0:
  // a manifest, else a shard checkpoint; bit 1: the rest is the payload
  // and is framed with FrameChecksummed first, so that mutations get past
  // the CRC), then the bytes.
  kDecodeCheckpoint = 15,
};
inline constexpr int kNumOps = 16;

// The shard's options, from the header.
struct FuzzConfig {
  bool async = false;
  bool sgd = false;               // else Adam
  bool scale_lr = false;          // async only
  bool lease = false;             // a 10 s worker lease, else none
  int total_num_replicas = 1;     // 1..4
  int replicas_to_aggregate = 1;  // sync: 1..total_num_replicas
  int staleness_bound = -1;       // async: -1 (none) or 0..7
  int learning_rate_index = 0;    // kLearningRates
  // The wire dtypes (the server's request handler's, ServerOptions::wire).
  ps::WireDTypes wire;
  // The servers' data queue: kDataSamples samples in chunks of chunk_size
  // (1..8); data_epochs 0 (no end) .. 3.
  bool data_queue = false;
  int chunk_size = 1;
  int data_epochs = 0;
  // A checkpoint directory (a fresh one per input, keep kCheckpointKeep)
  // saving every every_steps (0: not by steps) .. 3.
  bool checkpoints = false;
  int every_steps = 0;

  static FuzzConfig Decode(const uint8_t header[6]);
  std::string Encode() const;
  // `checkpoint_dir`: the input's directory when `checkpoints`.
  ps::ShardOptions ToShardOptions(const std::string& checkpoint_dir = "") const;
};

inline constexpr int64_t kDataSamples = 20;
inline constexpr uint64_t kDataSeed = 7;
inline constexpr int kCheckpointKeep = 2;

inline constexpr double kLearningRates[] = {0.001, 0.1, 1.0, 1000.0};
inline constexpr absl::Duration kLease = absl::Seconds(10);

// Reads requests off an input.
class FuzzReader {
 public:
  FuzzReader(const uint8_t* data, size_t size);

  const FuzzConfig& config() const { return config_; }
  // The next request; false at the end.
  bool Next(FuzzOp* op, absl::string_view* payload);

 private:
  FuzzConfig config_;
  const uint8_t* p_;
  const uint8_t* const end_;
};

// Builds an input.
class FuzzInputWriter {
 public:
  explicit FuzzInputWriter(const FuzzConfig& config)
      : bytes_(config.Encode()) {}

  FuzzInputWriter& Add(FuzzOp op, absl::string_view payload);
  FuzzInputWriter& Add(FuzzOp op, const google::protobuf::MessageLite& m) {
    return Add(op, m.SerializeAsString());
  }
  FuzzInputWriter& Byte(FuzzOp op, uint8_t b) {
    return Add(op, absl::string_view(reinterpret_cast<const char*>(&b), 1));
  }
  // kSharedPush: `segment` and the push.
  FuzzInputWriter& SharedPush(absl::string_view segment,
                              const ps::wire::PushRequest& push);
  // kDecodePull.
  FuzzInputWriter& DecodePull(bool shared, int slices,
                              absl::string_view segment,
                              absl::string_view response);
  // kDecodeCheckpoint.
  FuzzInputWriter& DecodeCheckpoint(bool manifest, bool frame,
                                    absl::string_view bytes);

  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Requests of cluster kCluster, for writing inputs.
ps::wire::TensorData Float32(const std::string& name,
                             const std::vector<int64_t>& shape,
                             const std::vector<float>& values);
ps::wire::InitializeRequest InitializeRequest(
    const std::vector<ps::wire::TensorData>& variables);
ps::wire::PushRequest PushRequest(
    int worker_id, int64_t step,
    const std::vector<ps::wire::TensorData>& gradients);
ps::wire::PullRequest PullRequest(int64_t min_step, int worker_id);
ps::wire::JoinRequest JoinRequest(int worker_id);
ps::wire::LeaveRequest LeaveRequest(int worker_id);
ps::wire::StatusRequest StatusRequest();
ps::wire::ShutdownRequest ShutdownRequest();
// With `give_back` (epoch, index, lease) when set.
ps::wire::LeaseDataRequest LeaseDataRequest(
    int worker_id, const ps::wire::DataChunkRef* give_back = nullptr);
ps::wire::RollbackRequest RollbackRequest(int64_t label, int64_t generation);
ps::wire::CheckpointRequest CheckpointRequest(int64_t label, bool now);
ps::wire::ListCheckpointsRequest ListCheckpointsRequest();
// `values` in bfloat16, or float16 times `scale` (a float16 tensor's bytes
// are value * scale; TensorData.scale).
ps::wire::TensorData BFloat16(const std::string& name,
                              const std::vector<int64_t>& shape,
                              const std::vector<float>& values);
ps::wire::TensorData Float16(const std::string& name,
                             const std::vector<int64_t>& shape,
                             const std::vector<float>& values, float scale);

// Reads the 3-byte little-endian length at the front of `*bytes` (missing
// bytes read as zero) and splits off that many bytes (at most what is
// there), for the ops' own framing.
absl::string_view TakeLengthPrefixed(absl::string_view* bytes);

// The inputs at `path`: the file, or every regular file in the directory
// (sorted by name), as (path, bytes). NOT_FOUND when there is none.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadInputs(
    const std::string& path);

}  // namespace fuzz
}  // namespace psgd

#endif  // PSGD_TESTS_FUZZ_FUZZ_INPUT_H_
