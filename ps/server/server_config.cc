#include "ps/server/server_config.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {

namespace {

// The training block's mode, aggregation, backup workers and staleness
// rules, into `o`.
void SetTrainingOptions(const ClusterConfig& config, ShardOptions& o) {
  const config::TrainingConfig& t = config.training();
  const bool sync = t.mode() == config::TrainingConfig::SYNC;
  o.mode = sync ? Mode::kSync : Mode::kAsync;
  // Async applies every gradient on arrival: no aggregation.
  o.replicas_to_aggregate = sync ? t.replicas_to_aggregate() : 1;
  o.total_num_replicas = t.total_num_replicas();
  o.max_workers = config.has_max_workers() ? config.max_workers() : 0;
  if (sync && t.has_adaptive_backups()) {
    const config::AdaptiveBackupsConfig& a = t.adaptive_backups();
    o.adaptive_backups = true;
    o.adaptive.n_min = a.min_replicas();
    o.adaptive.n_max =
        a.has_max_replicas() ? a.max_replicas() : t.total_num_replicas();
    o.adaptive.window = a.window_steps();
    o.adaptive.warmup = a.warmup_steps();
  }
  // Unset in the config: no bound (the server says -1); 0 is a bound.
  o.n_follows_live =
      sync && t.replicas_rule() == config::TrainingConfig::LIVE_MINUS_BACKUPS;
  // The linear rule's global batch is the step's: batch x its N.
  o.lr_scale_follows_n =
      o.n_follows_live && t.optimizer().schedule().has_base_batch_size();
  o.staleness_bound = t.has_staleness_bound() ? t.staleness_bound() : -1;
  o.max_push_staleness =
      t.has_max_push_staleness() ? t.max_push_staleness() : -1;
  o.scale_lr_by_staleness = t.lr_scaled_by_staleness();
  o.dc_asgd_lambda = t.dc_asgd_lambda();
  o.async_beta1 = t.has_async_beta1() ? t.async_beta1() : -1;
}

// The training block's optimizer and its schedule.
OptimizerOptions OptimizerOptionsFromConfig(const config::TrainingConfig& t) {
  const config::OptimizerConfig& opt = t.optimizer();
  OptimizerOptions o;
  switch (opt.kind()) {
    case config::OptimizerConfig::SGD:
      o.kind = OptimizerOptions::Kind::kSgd;
      break;
    case config::OptimizerConfig::MOMENTUM:
      o.kind = OptimizerOptions::Kind::kMomentum;
      break;
    default:
      o.kind = OptimizerOptions::Kind::kAdam;
  }
  o.learning_rate = opt.learning_rate();
  o.beta1 = opt.beta1();
  o.beta2 = opt.beta2();
  o.epsilon = opt.epsilon();
  o.momentum = opt.momentum();
  o.nesterov = opt.nesterov();
  o.weight_decay = opt.weight_decay();
  o.no_weight_decay.assign(opt.no_weight_decay().begin(),
                           opt.no_weight_decay().end());
  o.schedule = LrScheduleFromConfig(t);
  return o;
}

// The checkpoints, the data queue and the ledger of shard `index`.
void SetStorageOptions(const ClusterConfig& config, int index,
                       ShardOptions& o) {
  const config::TrainingConfig& t = config.training();
  if (config.has_checkpoint()) {
    o.checkpoint.dir = CheckpointDir(config, index);
    o.checkpoint.every_steps = config.checkpoint().every_steps();
    o.checkpoint.keep = config.checkpoint().keep();
    o.checkpoint.per_host = PerHostCheckpoints(config);
  }
  // The servers hand out the data: shard 0 holds the queue.
  if (config.data().sharding() == config::DataConfig::SERVERS && index == 0) {
    o.data_queue_on = true;
    o.data_queue.num_samples = TrainingSamples(config);
    o.data_queue.chunk_size = t.batch_size();
    o.data_queue.seed = t.seed();
    o.data_epochs = t.has_epochs() ? t.epochs() : 0;
  }
  // Every shard keeps a ledger of the chunks it applied: ps:0's is
  // ledger.jsonl, ps:K's ledger-psK.jsonl, in its checkpoint directory.
  if (config.data().sharding() == config::DataConfig::SERVERS &&
      config.data().ledger()) {
    o.ledger_file = CheckpointDir(config, index) +
                    (index == 0 ? std::string("/ledger.jsonl")
                                : absl::StrCat("/ledger-ps", index, ".jsonl"));
  }
}

// What only the server uses: where it listens, its peers, the token and
// TLS, and the wire (dtypes, which the server's request handler converts,
// and the UCX data plane).
void SetNetworkOptions(const ClusterConfig& config, int index,
                       ServerOptions& o) {
  o.listen_address = ListenAddress(config.ps(index));
  o.metrics_port = config.ps(index).metrics_port();
  for (const config::PsTask& p : config.ps()) {
    o.ps_addresses.push_back(p.address());
  }
  o.security = SecurityFromConfig(config);
  o.wire = WireDTypesFromConfig(config);
  o.ucx = config.wire().data_plane() == config::WireConfig::UCX;
  o.ucx_transports = config.wire().ucx_transports();
}

}  // namespace

absl::StatusOr<ServerOptions> ServerOptionsFromConfig(
    const ClusterConfig& config, int index) {
  if (index < 0 || index >= config.ps_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps:", index, " is not in cluster '", config.name(), "' (",
                     config.ps_size(), " ps tasks)"));
  }
  ServerOptions o;
  ShardOptions& shard = o.shard;
  shard.shard_index = index;
  shard.num_shards = config.ps_size();
  shard.cluster_name = config.name();
  SetTrainingOptions(config, shard);
  shard.optimizer = OptimizerOptionsFromConfig(config.training());
  shard.batch_norm_statistics =
      config.model().batch_norm_statistics() == config::ModelConfig::LOCAL
          ? BatchNormStatistics::kLocal
          : BatchNormStatistics::kServer;
  shard.worker_lease = absl::Seconds(config.worker_lease_seconds());
  SetStorageOptions(config, index, shard);
  SetNetworkOptions(config, index, o);
  RETURN_IF_ERROR(ValidateServerOptions(o));
  return o;
}

}  // namespace ps
}  // namespace psgd
