#include "ps/server/server_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cluster_config.h"
#include "common/cluster_flags.h"
#include "common/host_address.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "ps/server/server_config.h"
#include "ps/server/server_options.h"
#include "ps/state/optimizer_flags.h"

namespace {
const psgd::ps::ServerOptions kDefaults;
}  // namespace

ABSL_FLAG(std::string, listen_address, kDefaults.listen_address,
          "host:port to listen on; port 0 lets the OS choose (see "
          "--port_file).");
ABSL_FLAG(int, shard_index, kDefaults.shard.shard_index,
          "This server's shard, in [0, num_shards).");
ABSL_FLAG(int, num_shards, kDefaults.shard.num_shards, "Number of shards S.");
ABSL_FLAG(std::string, cluster_name, kDefaults.shard.cluster_name,
          "Cluster name; requests naming another cluster are refused.");
ABSL_FLAG(std::string, mode, "sync", "sync or async.");
ABSL_FLAG(std::string, batch_norm_statistics, "server",
          "Where batch norm's running statistics live: server (variables "
          "of the shards, folded from the pushes' batch statistics) or "
          "local (on the workers; the shards refuse them).");
ABSL_FLAG(int, replicas_to_aggregate, kDefaults.shard.replicas_to_aggregate,
          "Sync: gradients averaged per step (N).");
ABSL_FLAG(int, total_num_replicas, kDefaults.shard.total_num_replicas,
          "Number of workers M >= N; worker ids are 0..M-1.");
ABSL_FLAG(int64_t, staleness_bound, kDefaults.shard.staleness_bound,
          "Async: a worker more than this many pushes ahead of the slowest "
          "live worker waits in its pull (SSP); -1: no bound.");
ABSL_FLAG(int64_t, max_push_staleness, kDefaults.shard.max_push_staleness,
          "Async: refuse gradients staler than this; -1: no limit.");
ABSL_FLAG(bool, scale_lr_by_staleness, kDefaults.shard.scale_lr_by_staleness,
          "Async: learning rate times 1/staleness.");
ABSL_FLAG(double, dc_asgd_lambda, kDefaults.shard.dc_asgd_lambda,
          "Async: DC-ASGD's lambda (delay compensation); 0: off.");
ABSL_FLAG(double, async_beta1, kDefaults.shard.async_beta1,
          "Async: Adam's beta1 in place of --beta1; -1: --beta1.");
ABSL_FLAG(int64_t, max_message_bytes, kDefaults.shard.max_message_bytes,
          "gRPC message size limit (send and receive).");
ABSL_FLAG(int64_t, split_threshold_bytes, kDefaults.shard.split_threshold_bytes,
          "Variables above this are split into row slices over the shards; "
          "workers must use the same value.");
ABSL_FLAG(std::string, ps_addresses, "",
          "With --num_shards > 1: every shard's address (host:port, comma "
          "separated, by shard index), where shard 0 sends its decisions to "
          "the others (docs/PS.md, \"One decision per push\").");
ABSL_FLAG(std::string, port_file, "",
          "When set, the bound port is written to this file once serving.");
ABSL_FLAG(double, worker_lease_seconds, 0,
          "A worker silent this long (not waiting in a pull) leaves the live "
          "set; 0: never.");
ABSL_FLAG(std::string, config, "",
          "Cluster config file: the options of --task come from it.");
ABSL_FLAG(std::string, token_file, "",
          "A file holding the cluster's token: every call must carry it "
          "(gRPC metadata 'authorization: Bearer <token>'). Default: the "
          "cluster's default token file ($PSGD_TOKEN_FILE, else "
          "~/.config/psgd/tokens/CLUSTER_NAME.token), made when absent. With "
          "--config, the config's security block says it.");
ABSL_FLAG(std::string, peer_token_file, "",
          "A file holding the servers' peer token: ApplyDecisions (shard 0's "
          "decisions to the other shards) must carry it, so that a worker "
          "holding the cluster token cannot send decisions. Default: the "
          "cluster token file's name + '.peer', made when absent (with more "
          "than one shard). With --config, the config's security block says "
          "it.");
ABSL_FLAG(bool, insecure, false,
          "Take every call without a token (anyone who can reach the port "
          "may drive the server). Not with --token_file or --config.");
ABSL_FLAG(int, bulk_threads, 0,
          "Threads for the shard's bulk work, the calling one included: the "
          "optimizer's update of every variable, a push's check, the copies "
          "through shared memory. 0: the machine's cores, at most 4. A "
          "property of this machine, so allowed beside --config.");
ABSL_FLAG(double, slow_step_seconds, 10,
          "Log which workers a sync step waits for once it has waited this "
          "long (0: never).");
ABSL_FLAG(std::string, run_dir, "",
          "Where ps-I.jsonl and ps-I.summary.json go; default: the run "
          "directory the chief sends with Initialize, only when it is "
          "RUN_ROOT/NAME-... of --config's run_root, an existing directory "
          "of this user's (no files otherwise).");

namespace psgd {
namespace ps {

namespace {

// The options a config sets; none may be set beside --config. (Debian's
// Abseil keeps IsSpecifiedOnCommandLine private, so "set" means "differs
// from its default".)
constexpr const char* kOptionFlags[] = {"listen_address",
                                        "shard_index",
                                        "num_shards",
                                        "cluster_name",
                                        "mode",
                                        "replicas_to_aggregate",
                                        "batch_norm_statistics",
                                        "total_num_replicas",
                                        "staleness_bound",
                                        "max_push_staleness",
                                        "scale_lr_by_staleness",
                                        "dc_asgd_lambda",
                                        "async_beta1",
                                        "optimizer",
                                        "learning_rate",
                                        "beta1",
                                        "beta2",
                                        "epsilon",
                                        "momentum",
                                        "nesterov",
                                        "weight_decay",
                                        "no_weight_decay",
                                        "max_message_bytes",
                                        "split_threshold_bytes",
                                        "worker_lease_seconds",
                                        "token_file",
                                        "peer_token_file",
                                        "insecure"};

// The servers' peer token (SecurityOptions::peer_token) for a cluster of
// more than one shard with a token: the one in `named`, else the one beside
// the cluster's `token_file` (made when absent: the first server makes it,
// the others read it), else none (an inline cluster token serves; Start
// warns).
absl::Status ResolvePeerToken(const std::string& named,
                              const std::string& token_file, ServerOptions* o) {
  if (o->security.insecure) {
    if (!named.empty()) {
      return absl::InvalidArgumentError(
          "--insecure and a peer token file: choose one");
    }
    return absl::OkStatus();
  }
  if (!named.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(named);
    if (!token.ok()) return Annotate(token.status(), "the peer token file: ");
    o->security.peer_token = *std::move(token);
  } else if (o->shard.num_shards > 1 && !token_file.empty()) {
    absl::StatusOr<std::string> token =
        ReadOrCreateTokenFile(PeerTokenFileOf(token_file));
    if (!token.ok()) {
      return Annotate(token.status(), "the servers' peer token file: ");
    }
    o->security.peer_token = *std::move(token);
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerOptions> OptionsFromConfig(const std::string& path) {
  for (const char* name : kOptionFlags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag != nullptr && flag->CurrentValue() != flag->DefaultValue()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " cannot be combined with --config (", path,
                       "): the config sets it"));
    }
  }
  ASSIGN_OR_RETURN(ResolvedCluster cluster, ResolvedClusterFromFlags());
  const ClusterConfig& config = cluster.config;
  const TaskId task = cluster.task;
  ASSIGN_OR_RETURN(ServerOptions o,
                   ServerOptionsFromConfig(config, task.index));
  RETURN_IF_ERROR(ResolvePeerToken(config.security().peer_token_file(),
                                   config.security().token_file(), &o));
  // A name that does not resolve or a port in use, named with the task
  // before anything starts.
  RETURN_IF_ERROR(CheckPsCanListen(config, task.index));
  o.port_file = absl::GetFlag(FLAGS_port_file);
  return o;
}

}  // namespace

absl::StatusOr<LifecycleOptions> LifecycleOptionsFromFlags() {
  LifecycleOptions o;
  o.run_dir = absl::GetFlag(FLAGS_run_dir);
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    // The run root an Initialize's run directory must lie in; the config's
    // errors are ServerOptionsFromFlags' to report.
    if (absl::StatusOr<ClusterConfig> config = LoadClusterConfig(path);
        config.ok()) {
      o.run_root = config->run_root();
    }
  }
  o.slow_step = absl::Seconds(absl::GetFlag(FLAGS_slow_step_seconds));
  // The other fields keep their defaults: an error is about this flag.
  RETURN_IF_ERROR(
      Annotate(ValidateLifecycleOptions(o), "--slow_step_seconds: "));
  return o;
}

absl::StatusOr<ResolvedCluster> ResolvedClusterFromFlags() {
  const std::string path = absl::GetFlag(FLAGS_config);
  if (path.empty()) {
    return absl::InvalidArgumentError("--print_cluster needs --config");
  }
  ASSIGN_OR_RETURN(ClusterConfig config, LoadClusterConfig(path));
  if (absl::GetFlag(FLAGS_task).empty() &&
      absl::GetFlag(FLAGS_cluster_from).empty()) {
    return absl::InvalidArgumentError(
        "--config needs --task=ps:I or --cluster_from=slurm|tf_config");
  }
  ASSIGN_OR_RETURN(ResolvedCluster cluster, ClusterFromFlags(config));
  if (cluster.task.kind != TaskId::Kind::kPs) {
    return absl::InvalidArgumentError(
        absl::StrCat("task '", cluster.task.ToString(), "' (from ",
                     cluster.source, ") is a worker; run worker for it"));
  }
  return cluster;
}

absl::StatusOr<ServerOptions> ServerOptionsFromFlags() {
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    ASSIGN_OR_RETURN(ServerOptions o, OptionsFromConfig(path));
    o.shard.bulk_threads = absl::GetFlag(FLAGS_bulk_threads);
    return o;
  }
  if (!absl::GetFlag(FLAGS_task).empty()) {
    return absl::InvalidArgumentError("--task needs --config");
  }
  ServerOptions o;
  ShardOptions& shard = o.shard;
  o.listen_address = absl::GetFlag(FLAGS_listen_address);
  shard.shard_index = absl::GetFlag(FLAGS_shard_index);
  shard.num_shards = absl::GetFlag(FLAGS_num_shards);
  if (const std::string a = absl::GetFlag(FLAGS_ps_addresses); !a.empty()) {
    o.ps_addresses = absl::StrSplit(a, ',');
  }
  if (shard.num_shards > 1 &&
      static_cast<int>(o.ps_addresses.size()) != shard.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_shards=", shard.num_shards,
                     " needs --ps_addresses with ", shard.num_shards,
                     " addresses (shard 0 sends its decisions to the "
                     "others); got ",
                     o.ps_addresses.size()));
  }
  shard.cluster_name = absl::GetFlag(FLAGS_cluster_name);
  ASSIGN_OR_RETURN(shard.mode, ParseMode(absl::GetFlag(FLAGS_mode)));
  ASSIGN_OR_RETURN(
      shard.batch_norm_statistics,
      ParseBatchNormStatistics(absl::GetFlag(FLAGS_batch_norm_statistics)));
  shard.replicas_to_aggregate = absl::GetFlag(FLAGS_replicas_to_aggregate);
  shard.total_num_replicas = absl::GetFlag(FLAGS_total_num_replicas);
  shard.staleness_bound = absl::GetFlag(FLAGS_staleness_bound);
  shard.max_push_staleness = absl::GetFlag(FLAGS_max_push_staleness);
  shard.scale_lr_by_staleness = absl::GetFlag(FLAGS_scale_lr_by_staleness);
  shard.dc_asgd_lambda = absl::GetFlag(FLAGS_dc_asgd_lambda);
  shard.async_beta1 = absl::GetFlag(FLAGS_async_beta1);
  ASSIGN_OR_RETURN(shard.optimizer, OptimizerOptionsFromFlags());
  shard.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  shard.split_threshold_bytes = absl::GetFlag(FLAGS_split_threshold_bytes);
  shard.bulk_threads = absl::GetFlag(FLAGS_bulk_threads);
  o.port_file = absl::GetFlag(FLAGS_port_file);
  // NaN becomes an infinite lease, which the sanitizer refuses.
  shard.worker_lease = absl::Seconds(absl::GetFlag(FLAGS_worker_lease_seconds));
  o.security.insecure = absl::GetFlag(FLAGS_insecure);
  TokenSource source;
  source.token_file = absl::GetFlag(FLAGS_token_file);
  source.insecure = o.security.insecure;
  if (source.insecure && !source.token_file.empty()) {
    return absl::InvalidArgumentError(
        "--insecure and --token_file: choose one");
  }
  // The config loader's resolver; only a file's errors are the flag's.
  absl::StatusOr<ClusterToken> token =
      ResolveClusterToken(shard.cluster_name, source);
  if (!token.ok()) {
    return source.token_file.empty()
               ? token.status()
               : Annotate(token.status(), "--token_file: ");
  }
  o.security.token = std::move(token->token);
  RETURN_IF_ERROR(
      ResolvePeerToken(absl::GetFlag(FLAGS_peer_token_file), token->file, &o));
  // The sanitizer the config's options go through too.
  RETURN_IF_ERROR(ValidateServerOptions(o));
  return o;
}

}  // namespace ps
}  // namespace psgd
