// The input format of the shard fuzzer (tests/fuzz/shard_fuzz.h): a header
// that chooses the shard's options, then a sequence of requests. Every byte
// string is a valid input (missing bytes read as zero, a truncated payload
// is what is left), so libFuzzer can mutate freely; FuzzInputWriter builds
// inputs on purpose (the seed corpus, regression tests).
//
//   header   4 bytes   options (FuzzConfig::Decode)
//   request  1 byte    FuzzOp (the byte modulo kNumOps)
//            2 bytes   payload length, little-endian
//            n bytes   payload: a serialised request of proto/ps.proto for
//                      the RPCs, a byte for kExpireWorkers and kCancelPull
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
};
inline constexpr int kNumOps = 9;

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

  static FuzzConfig Decode(const uint8_t header[4]);
  std::string Encode() const;
  ps::ServerOptions ToServerOptions() const;
};

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

// The inputs at `path`: the file, or every regular file in the directory
// (sorted by name), as (path, bytes). NOT_FOUND when there is none.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadInputs(
    const std::string& path);

}  // namespace fuzz
}  // namespace psgd

#endif  // PSGD_TESTS_FUZZ_FUZZ_INPUT_H_
