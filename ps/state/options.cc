#include "ps/state/options.h"

#include "absl/strings/str_cat.h"
#include "common/adam.h"
#include "common/cluster_name.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {
namespace {

// The largest message gRPC accepts (its limits are ints).
constexpr int64_t kMaxGrpcMessageBytes = (int64_t{1} << 31) - 1;
constexpr int64_t kMinMessageBytes = int64_t{4} << 20;

}  // namespace

PsOptionValues PsOptionValuesOf(const ShardOptions& o) {
  PsOptionValues v;
  v.async = o.mode == Mode::kAsync;
  v.adam = o.optimizer.kind == OptimizerOptions::Kind::kAdam;
  v.replicas_to_aggregate = o.replicas_to_aggregate;
  // -1 is "off" here; any other value is set (and -2 out of range).
  if (o.staleness_bound != -1) v.staleness_bound = o.staleness_bound;
  if (o.max_push_staleness != -1) v.max_push_staleness = o.max_push_staleness;
  v.scale_lr_by_staleness = o.scale_lr_by_staleness;
  v.dc_asgd_lambda = o.dc_asgd_lambda;
  if (o.async_beta1 != -1) v.async_beta1 = o.async_beta1;
  v.worker_lease_seconds = absl::ToDoubleSeconds(o.worker_lease);
  v.checkpoint_every_steps = o.checkpoint.every_steps;
  v.checkpoint_keep = o.checkpoint.keep;
  return v;
}

absl::string_view ModeName(Mode mode) {
  return mode == Mode::kSync ? "sync" : "async";
}

absl::StatusOr<Mode> ParseMode(absl::string_view name) {
  if (name == "sync") return Mode::kSync;
  if (name == "async") return Mode::kAsync;
  return BadServerOption("mode", name, "expected sync or async");
}

absl::string_view BatchNormStatisticsName(BatchNormStatistics b) {
  return b == BatchNormStatistics::kServer ? "server" : "local";
}

absl::StatusOr<BatchNormStatistics> ParseBatchNormStatistics(
    absl::string_view name) {
  if (name == "server") return BatchNormStatistics::kServer;
  if (name == "local") return BatchNormStatistics::kLocal;
  return BadServerOption("batch_norm_statistics", name,
                         "expected server or local");
}

absl::string_view OptimizerKindName(OptimizerOptions::Kind kind) {
  switch (kind) {
    case OptimizerOptions::Kind::kAdam:
      return "adam";
    case OptimizerOptions::Kind::kSgd:
      return "sgd";
    case OptimizerOptions::Kind::kMomentum:
      return "momentum";
  }
  return "?";
}

absl::StatusOr<OptimizerOptions::Kind> ParseOptimizerKind(
    absl::string_view name) {
  if (name == "adam") return OptimizerOptions::Kind::kAdam;
  if (name == "sgd") return OptimizerOptions::Kind::kSgd;
  if (name == "momentum") return OptimizerOptions::Kind::kMomentum;
  return BadServerOption("optimizer", name, "expected adam, sgd or momentum");
}

absl::Status ValidateOptimizerOptions(const OptimizerOptions& opt,
                                      absl::string_view prefix) {
  auto bad = [&](absl::string_view field, absl::string_view value,
                 absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, field, "=", value, ": ", why));
  };
  if (const absl::optional<OptimizerOptionProblem> p =
          FindOptimizerOptionProblem(
              AdamHyper{opt.learning_rate, opt.beta1, opt.beta2, opt.epsilon},
              opt.kind == OptimizerOptions::Kind::kAdam);
      p.has_value()) {
    return bad(p->field, absl::StrCat(p->value), p->rule);
  }
  if (const absl::optional<OptimizerOptionProblem> p = FindSgdOptionProblem(
          SgdHyper{opt.momentum, opt.nesterov, opt.weight_decay},
          OptimizerKindName(opt.kind));
      p.has_value()) {
    return bad(p->field, absl::StrCat(p->value), p->rule);
  }
  if (absl::Status s = ValidateLrSchedule(opt.schedule, 0); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, s.message()));
  }
  return absl::OkStatus();
}

namespace {

// Elastic membership and the rules that follow the live workers.
absl::Status ValidateMembership(const ShardOptions& o) {
  if (o.max_workers != 0 && o.max_workers < o.total_num_replicas) {
    return BadServerOption("max_workers", absl::StrCat(o.max_workers),
                           absl::StrCat("is below total_num_replicas (",
                                        o.total_num_replicas, ")"));
  }
  if (o.n_follows_live && (o.mode != Mode::kSync || o.adaptive_backups)) {
    return absl::InvalidArgumentError(
        "server option n_follows_live: sync mode only, and not with adaptive "
        "backup workers");
  }
  if (o.lr_scale_follows_n && !o.n_follows_live) {
    return absl::InvalidArgumentError(
        "server option lr_scale_follows_n: only with n_follows_live");
  }
  return absl::OkStatus();
}

// The data queue, when the shard holds one.
absl::Status ValidateDataQueue(const ShardOptions& o) {
  if (o.data_queue_on) {
    if (absl::Status s = ValidateDataQueueOptions(o.data_queue); !s.ok()) {
      return s;
    }
    if (o.data_epochs < 0) {
      return BadServerOption("data_epochs", absl::StrCat(o.data_epochs),
                             "must be >= 0 (0: no end)");
    }
  }
  return absl::OkStatus();
}

// Adaptive backup workers, when on.
absl::Status ValidateAdaptiveBackups(const ShardOptions& o) {
  if (o.adaptive_backups) {
    if (o.mode != Mode::kSync) {
      return absl::InvalidArgumentError(
          "adaptive backup workers need sync mode");
    }
    if (absl::Status s =
            ValidateAdaptiveBackupOptions(o.adaptive, o.total_num_replicas);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Which shard it is, and its cluster's name. (Where it listens is the
// server's: ps/server/server_options.h.)
absl::Status ValidateIdentity(const ShardOptions& o) {
  if (o.num_shards < 1) {
    return BadServerOption("num_shards", absl::StrCat(o.num_shards),
                           "must be >= 1");
  }
  if (o.shard_index < 0 || o.shard_index >= o.num_shards) {
    return BadServerOption(
        "shard_index", absl::StrCat(o.shard_index),
        absl::StrCat("must be in [0, num_shards=", o.num_shards, ")"));
  }
  if (!IsValidClusterName(o.cluster_name)) {
    return BadServerOption("cluster_name", o.cluster_name,
                           absl::StrCat("must be ", kClusterNameRule));
  }
  return absl::OkStatus();
}

// The bounds shared with the cluster config (common/ps_option_rules.h) and
// how many gradients a step averages.
absl::Status ValidateAggregation(const ShardOptions& o) {
  if (const absl::optional<PsOptionProblem> bad =
          FindPsOptionProblem(PsOptionValuesOf(o));
      bad.has_value()) {
    return BadServerOption(bad->field, bad->value, bad->rule);
  }
  if (o.total_num_replicas < o.replicas_to_aggregate) {
    return BadServerOption("total_num_replicas",
                           absl::StrCat(o.total_num_replicas),
                           absl::StrCat("must be >= replicas_to_aggregate=",
                                        o.replicas_to_aggregate));
  }
  if (o.mode == Mode::kAsync && o.replicas_to_aggregate != 1) {
    return BadServerOption("replicas_to_aggregate",
                           absl::StrCat(o.replicas_to_aggregate),
                           "async mode aggregates nothing: must be 1");
  }
  return absl::OkStatus();
}

// The gRPC message limit and the split threshold below it.
absl::Status ValidateMessageSizes(const ShardOptions& o) {
  if (o.max_message_bytes < kMinMessageBytes ||
      o.max_message_bytes > kMaxGrpcMessageBytes) {
    return BadServerOption("max_message_bytes",
                           absl::StrCat(o.max_message_bytes),
                           absl::StrCat("must be in [", kMinMessageBytes, ", ",
                                        kMaxGrpcMessageBytes, "]"));
  }
  if (o.split_threshold_bytes < 1024 ||
      o.split_threshold_bytes > o.max_message_bytes) {
    return BadServerOption(
        "split_threshold_bytes", absl::StrCat(o.split_threshold_bytes),
        absl::StrCat(
            "must be in [1024, max_message_bytes=", o.max_message_bytes, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BadServerOption(absl::string_view field, absl::string_view value,
                             absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("server option ", field, "=", value, ": ", why));
}

absl::Status ValidateShardOptionsBeforeIdentity(const ShardOptions& o) {
  if (o.bulk_threads < 0 || o.bulk_threads > 256) {
    return BadServerOption("bulk_threads", absl::StrCat(o.bulk_threads),
                           "must be in [0, 256] (0: the machine's cores, at "
                           "most 4)");
  }
  RETURN_IF_ERROR(ValidateMembership(o));
  RETURN_IF_ERROR(ValidateDataQueue(o));
  RETURN_IF_ERROR(ValidateAdaptiveBackups(o));
  return absl::OkStatus();
}

absl::Status ValidateShardOptionsFromIdentity(const ShardOptions& o) {
  RETURN_IF_ERROR(ValidateIdentity(o));
  RETURN_IF_ERROR(ValidateAggregation(o));
  RETURN_IF_ERROR(ValidateOptimizerOptions(o.optimizer, "server option "));
  RETURN_IF_ERROR(ValidateMessageSizes(o));
  return absl::OkStatus();
}

absl::Status ValidateShardOptions(const ShardOptions& o) {
  RETURN_IF_ERROR(ValidateShardOptionsBeforeIdentity(o));
  RETURN_IF_ERROR(ValidateShardOptionsFromIdentity(o));
  return absl::OkStatus();
}

OptimizerOptions ShardOptimizerOptions(const ShardOptions& options) {
  OptimizerOptions o = options.optimizer;
  if (options.async_beta1 != -1) o.beta1 = options.async_beta1;
  return o;
}

}  // namespace ps
}  // namespace psgd
