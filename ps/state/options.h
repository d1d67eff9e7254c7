// Every option a parameter-server shard (ps/shard, ps/state, ps/checkpoint)
// reads, in one plain struct: ShardOptions. What only the server process
// reads (where it listens, its peers' addresses, the token and TLS, the
// metrics port, the port file, the UCX data plane) is ps/server's
// ServerOptions (ps/server/server_options.h), which holds a ShardOptions
// and is filled by ps_server's flags or by the cluster config
// (ps/server/server_flags.h, ps/server/server_config.h).
// ValidateShardOptions, the shard's sanitizer, refuses bad values with a
// status naming the field and the value; the bounds it shares with the
// cluster config's loader are written once, in common/ps_option_rules.h.
//
// Thread-safety: plain values.
#ifndef PSGD_PS_STATE_OPTIONS_H_
#define PSGD_PS_STATE_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/lr_schedule.h"
#include "common/ps_option_rules.h"
#include "ps/state/adaptive_backups.h"
#include "ps/state/data_queue.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// Where batch norm's running statistics live (docs/CLUSTER.md, "Batch
// norm"): kServer keeps them as variables of the shards, folded from the
// batch statistics each push carries; kLocal leaves them to each worker, and
// a shard refuses them.
enum class BatchNormStatistics { kServer, kLocal };
// "server" / "local".
absl::string_view BatchNormStatisticsName(BatchNormStatistics b);
// INVALID_ARGUMENT naming the value for anything but "server" or "local".
absl::StatusOr<BatchNormStatistics> ParseBatchNormStatistics(
    absl::string_view name);

// "sync" / "async".
absl::string_view ModeName(Mode mode);
// INVALID_ARGUMENT naming the value for anything but "sync" or "async".
absl::StatusOr<Mode> ParseMode(absl::string_view name);

struct OptimizerOptions {
  enum class Kind { kAdam, kSgd, kMomentum };
  Kind kind = Kind::kAdam;
  // TensorFlow's AdamOptimizer defaults; SGD uses learning_rate only.
  double learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  // SGD and momentum SGD as PyTorch's (common/adam.h's SgdHyper rules):
  // momentum and nesterov for kMomentum, weight decay (L2 on the gradient)
  // on every variable but those named in no_weight_decay.
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::vector<std::string> no_weight_decay;
  // The learning rate's factor per update (common/lr_schedule.h).
  LrSchedule schedule;
};

// "adam" / "sgd" / "momentum".
absl::string_view OptimizerKindName(OptimizerOptions::Kind kind);
// INVALID_ARGUMENT naming the value for anything but "adam", "sgd" or
// "momentum".
absl::StatusOr<OptimizerOptions::Kind> ParseOptimizerKind(
    absl::string_view name);

// Checkpoints of a shard (docs/RELIABILITY.md).
struct CheckpointOptions {
  // The directory all shards share; empty: no checkpoints, and a restarted
  // server starts empty.
  std::string dir;
  // Save when the step reaches a multiple of this; 0: not by steps. Step 0
  // (the initial values) and the state at shutdown are saved whenever `dir`
  // is set.
  int64_t every_steps = 0;
  // Complete checkpoints kept (1..1000); older ones are deleted.
  int keep = 3;
  // `dir` is this shard's own (no other shard sees it): at start the server
  // asks the other shards (ps/server's ServerOptions::ps_addresses) which
  // checkpoints they have complete and restores the newest that all have
  // (docs/MULTIHOST.md). Until then the shard answers only Status,
  // ListCheckpoints and Shutdown.
  bool per_host = false;
  // How the shard's own checkpoint file is written (path, bytes): unset,
  // WriteFileAtomically (common/file_io.h). Tests put a disk here that
  // holds or fails a write; ps_server leaves it unset.
  std::function<absl::Status(const std::string&, absl::string_view)>
      write_file = nullptr;
};

struct ShardOptions {
  // This server's shard, in [0, num_shards).
  int shard_index = 0;
  int num_shards = 1;
  // Every request must carry this name (letters, digits, '_', '-', '.').
  std::string cluster_name = "psgd";

  Mode mode = Mode::kSync;
  // Sync: gradients averaged per step (N). Must be 1 in async mode.
  int replicas_to_aggregate = 1;
  // Number of workers M >= N (the extra ones are backup workers); worker ids
  // are 0..M-1 in both modes.
  int total_num_replicas = 1;
  // Sync: N chosen each step from the arrivals (ps/state/adaptive_backups.h)
  // in [adaptive.n_min, adaptive.n_max]; replicas_to_aggregate unused.
  bool adaptive_backups = false;
  // Sync: N = live workers - (total_num_replicas - replicas_to_aggregate),
  // at least 1, instead of replicas_to_aggregate (the config's
  // replicas_rule LIVE_MINUS_BACKUPS). Not with adaptive_backups.
  bool n_follows_live = false;
  // Sync: the linear scaling rule follows each step's N (the config's
  // schedule base_batch_size with replicas_rule LIVE_MINUS_BACKUPS): a step
  // that averages k gradients applies k / replicas_to_aggregate of the
  // schedule's scale, which was computed for replicas_to_aggregate.
  bool lr_scale_follows_n = false;
  // Elastic membership: worker ids up to max_workers - 1 may join (the
  // config's max_workers); 0: total_num_replicas.
  int max_workers = 0;
  AdaptiveBackupOptions adaptive;
  // The clock adaptive backup workers time the arrivals with; null:
  // absl::Now. For tests, which set the times.
  std::function<absl::Time()> adaptive_clock;
  // Async, stale-synchronous parallel (ps/state/ssp_clock.h): a pull of a
  // worker that has pushed more than this many gradients beyond the slowest
  // other live worker waits; -1 for no bound. Must be -1 in sync mode.
  int64_t staleness_bound = -1;
  // Async: a push whose staleness (shard steps since the step it was
  // computed from) exceeds this is refused; -1 for no limit. Must be -1 in
  // sync mode.
  int64_t max_push_staleness = -1;
  // Async: learning rate times 1/max(1, staleness). Must be false in sync.
  bool scale_lr_by_staleness = false;
  // Async: DC-ASGD's lambda (ps/state/delay_compensation.h); 0: off. Must be
  // finite and >= 0, and 0 in sync mode.
  double dc_asgd_lambda = 0;
  // Async: Adam's beta1 in place of optimizer.beta1 (asynchrony itself acts
  // as momentum); -1: optimizer.beta1. In [0, 1) when set; Adam and async
  // mode only.
  double async_beta1 = -1;

  OptimizerOptions optimizer;

  // The cluster config's model.batch_norm_statistics.
  BatchNormStatistics batch_norm_statistics = BatchNormStatistics::kServer;

  // gRPC send and receive limit; a shard refuses an Initialize whose
  // variables would not fit in one message.
  int64_t max_message_bytes = int64_t{256} << 20;
  // Variables larger than this are split into row slices over the shards
  // (ps/state/placement.h). Workers must use the same value.
  int64_t split_threshold_bytes = int64_t{1} << 20;

  // A live worker that sends nothing for this long, and is not waiting in
  // a pull, is taken out of the live set as if it had left (a killed
  // worker), so that sync steps go on without it. Zero: never; at most a
  // day.
  absl::Duration worker_lease = absl::ZeroDuration();

  // Threads for the shard's bulk work, the calling one included: the
  // optimizer's update of every variable, and the transports' copies of a
  // push's gradients and a pull's weights (ParameterShard::bulk_pool()).
  // 0: the machine's cores, at most 4. Each element is still one thread's
  // work: the weights are the same bits at any count.
  int bulk_threads = 0;

  CheckpointOptions checkpoint;
  // The data queue (the config's data { sharding: SERVERS }; docs/PS.md,
  // "The servers hand out the data"): shard 0 hands out the training data
  // in chunks of data_queue.chunk_size samples (ps/state/data_queue.h);
  // the other shards hold none. data_epochs > 0: no chunk of a later epoch
  // is leased (the data ends). ledger_file: where shard 0 writes a line per
  // chunk done (empty: none).
  bool data_queue_on = false;
  DataQueueOptions data_queue;
  int64_t data_epochs = 0;
  std::string ledger_file;
};

// OK, or INVALID_ARGUMENT naming the first bad field of the optimizer's
// options and its value after `prefix` ("server option momentum=1: must be
// in [0, 1)"); the schedule's fields as ValidateLrSchedule words them.
// ValidateShardOptions checks its optimizer with it; train_local its flags.
absl::Status ValidateOptimizerOptions(const OptimizerOptions& options,
                                      absl::string_view prefix);

// INVALID_ARGUMENT "server option FIELD=VALUE: WHY": how every refusal of
// a shard's or a server's option (ps/server/server_options.h) is worded.
absl::Status BadServerOption(absl::string_view field, absl::string_view value,
                             absl::string_view why);

// OK, or INVALID_ARGUMENT naming the first bad field and its value
// ("server option staleness_bound=-2: is negative"). ParameterShard::Create
// refuses what it refuses.
absl::Status ValidateShardOptions(const ShardOptions& options);

// ValidateShardOptions in its two halves, in its order: first the workers
// (membership, the data queue, adaptive backup workers), then from the
// shard's identity on (num_shards, shard_index, cluster_name, aggregation,
// the optimizer, message sizes). ps/server's ValidateServerOptions checks
// the listen address between the two, where it was always checked, so
// that the first bad field named stays the same.
absl::Status ValidateShardOptionsBeforeIdentity(const ShardOptions& options);
absl::Status ValidateShardOptionsFromIdentity(const ShardOptions& options);

// The options that the cluster config also sets, as the shared rules take
// them (common/ps_option_rules.h): -1 (off) becomes an unset value.
PsOptionValues PsOptionValuesOf(const ShardOptions& options);

// The optimizer a shard of `options` runs: options.optimizer, with beta1
// replaced by async_beta1 when that is set (async mode).
OptimizerOptions ShardOptimizerOptions(const ShardOptions& options);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_OPTIONS_H_
