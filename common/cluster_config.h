// Loads a cluster config file (text-format psgd.config.ClusterConfig, see
// proto/cluster.proto) and validates it. Every refusal is INVALID_ARGUMENT
// and names the file, the line and the field:
//
//   configs/bad.pbtxt:12: training.replicas_to_aggregate: 5 is more than
//   total_num_replicas (4)
//
// Defaults are filled in on success (N and M default to the number of
// workers; security.token holds the token of security.token_file), so
// callers read plain values.
//
// Thread-safety: free functions over values.
#ifndef PSGD_COMMON_CLUSTER_CONFIG_H_
#define PSGD_COMMON_CLUSTER_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/lr_schedule.h"
#include "common/security.h"
#include "proto/cluster.pb.h"

namespace psgd {

using config::ClusterConfig;

// Reads and validates the file; NOT_FOUND when it cannot be read.
absl::StatusOr<ClusterConfig> LoadClusterConfig(const std::string& path);

// Parses and validates `text`; `filename` only names it in errors.
absl::StatusOr<ClusterConfig> ParseClusterConfig(absl::string_view text,
                                                 absl::string_view filename);

// A task of the cluster: "ps:I" or "worker:J".
struct TaskId {
  enum class Kind { kPs, kWorker };
  Kind kind = Kind::kWorker;
  int index = 0;

  std::string ToString() const;
};

// Parses "ps:I" / "worker:J" and checks that the config has that task;
// INVALID_ARGUMENT naming the task and how many the config has otherwise.
absl::StatusOr<TaskId> ParseTaskId(absl::string_view text,
                                   const ClusterConfig& config);

// "host:port" into its parts; INVALID_ARGUMENT unless the port is 1..65535
// and the host is non-empty. An IPv6 host must be in brackets ("[::1]:80";
// *host keeps them).
absl::Status SplitHostPort(absl::string_view address, std::string* host,
                           int* port);

// True when the ps tasks have checkpoint directories of their own
// (PsTask.checkpoint_dir): nothing is shared between them, and a restarted
// ps agrees with the others over RPC which checkpoint to restore.
bool PerHostCheckpoints(const ClusterConfig& config);

// Where ps task `task` listens: its listen_address, else its address.
std::string ListenAddress(const config::PsTask& task);

// The checkpoint directory of ps:`ps_index` of a validated config: its own,
// else the cluster's; empty without a checkpoint block.
std::string CheckpointDir(const ClusterConfig& config, int ps_index);

// The worker tasks a config allows: max_workers when set (elastic
// membership), else the listed workers.
int MaxWorkers(const ClusterConfig& config);
// Worker `index`'s task: its own, or for an elastic worker beyond the list
// the last listed one's (index < MaxWorkers(config)).
const config::WorkerTask& WorkerTaskOf(const ClusterConfig& config, int index);

// The training set's size: data.num_samples, else the source's (50000 for
// CIFAR10, synthetic_train_size for SYNTHETIC).
int64_t TrainingSamples(const ClusterConfig& config);

// "gpu:K" -> K, "cpu" -> -1; INVALID_ARGUMENT otherwise.
absl::StatusOr<int> ParseDevice(absl::string_view device);

// The security of a validated config, for servers and workers alike:
// no token and no TLS when it has no security block.
SecurityOptions SecurityFromConfig(const ClusterConfig& config);

// The learning-rate schedule that training.optimizer.schedule describes,
// with the linear scaling rule's factor worked out (the global batch of one
// update over schedule.base_batch_size). A config that LoadClusterConfig
// accepted gives a valid schedule.
LrSchedule LrScheduleFromConfig(const config::TrainingConfig& training);

}  // namespace psgd

#endif  // PSGD_COMMON_CLUSTER_CONFIG_H_
