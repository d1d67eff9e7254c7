#include "common/cluster_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/adam.h"
#include "common/cluster_name.h"
#include "common/model_names.h"
#include "common/ps_option_rules.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace psgd {
namespace {

using google::protobuf::Message;
using google::protobuf::TextFormat;
using google::protobuf::io::ErrorCollector;

// Collects the parser's first error with its line (1-based).
class FirstError : public ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!has_error_) {
      has_error_ = true;
      line_ = line + 1;
      message_ = message;
    }
  }
  void AddWarning(int, int, const std::string&) override {}

  bool has_error_ = false;
  int line_ = 0;
  std::string message_;
};

// Names fields with their line numbers, from the parser's location tree.
class Locator {
 public:
  Locator(absl::string_view filename, const TextFormat::ParseInfoTree* tree)
      : filename_(filename), tree_(tree) {}

  // The locator of a nested message field (index for repeated ones).
  Locator Nested(const Message& parent, absl::string_view field,
                 int index = -1) const {
    const TextFormat::ParseInfoTree* nested = nullptr;
    if (tree_ != nullptr && IndexFits(parent, field, index)) {
      nested = tree_->GetTreeForNested(Field(parent, field), index);
    }
    Locator l(filename_, nested);
    l.fallback_line_ = Line(parent, field, index);
    if (l.fallback_line_ == 0) l.fallback_line_ = fallback_line_;
    return l;
  }

  // INVALID_ARGUMENT "FILE:LINE: PATH: MESSAGE".
  absl::Status Error(const Message& msg, absl::string_view field,
                     absl::string_view path, absl::string_view message,
                     int index = -1) const {
    int line = Line(msg, field, index);
    if (line == 0) line = fallback_line_;
    std::string where =
        line > 0 ? absl::StrCat(filename_, ":", line) : std::string(filename_);
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", path, ": ", message));
  }

 private:
  static const google::protobuf::FieldDescriptor* Field(
      const Message& msg, absl::string_view name) {
    const auto* f = msg.GetDescriptor()->FindFieldByName(std::string(name));
    if (f == nullptr) {
      // A programmer's error: validation names a field the schema lacks.
      std::abort();
    }
    return f;
  }

  // The parser's tree CHECK-fails on an index that does not fit the field.
  static bool IndexFits(const Message& msg, absl::string_view field,
                        int index) {
    const auto* f = Field(msg, field);
    if (!f->is_repeated()) return index == -1;
    return index >= 0 && index < msg.GetReflection()->FieldSize(msg, f);
  }

  int Line(const Message& msg, absl::string_view field, int index) const {
    if (tree_ == nullptr || !IndexFits(msg, field, index)) return 0;
    auto loc = tree_->GetLocation(Field(msg, field), index);
    return loc.line >= 0 ? loc.line + 1 : 0;
  }

  std::string filename_;
  const TextFormat::ParseInfoTree* tree_;
  int fallback_line_ = 0;
};

absl::Status ValidateTasks(const ClusterConfig& c, const Locator& at) {
  if (c.ps_size() == 0) {
    return at.Error(c, "ps", "ps", "the cluster has no ps task");
  }
  if (c.worker_size() == 0) {
    return at.Error(c, "worker", "worker", "the cluster has no worker task");
  }
  absl::flat_hash_map<std::string, std::string> seen;  // address -> task
  auto check_address = [&](const Message& task, const std::string& address,
                           const std::string& task_name, const Locator& loc,
                           const std::string& path) -> absl::Status {
    if (address.empty()) {
      return loc.Error(task, "address", path, "missing (expected host:port)");
    }
    std::string host;
    int port;
    if (absl::Status s = SplitHostPort(address, &host, &port); !s.ok()) {
      return loc.Error(task, "address", path, s.message());
    }
    if (host == "0.0.0.0" || host == "::" || host == "*") {
      return loc.Error(task, "address", path,
                       absl::StrCat("'", address,
                                    "' is a wildcard, which no task can dial: "
                                    "give the host's name or address here "
                                    "and the wildcard as listen_address"));
    }
    auto [it, inserted] = seen.emplace(address, task_name);
    if (!inserted) {
      return loc.Error(
          task, "address", path,
          absl::StrCat("'", address, "' is already the address of ",
                       it->second));
    }
    return absl::OkStatus();
  };
  // host:metrics_port -> task, so that two tasks of one host do not share
  // a metrics port (nor a task's gRPC port).
  auto check_metrics_port =
      [&](const Message& task, int port, const std::string& address,
          const std::string& task_name, const Locator& loc,
          const std::string& path) -> absl::Status {
    if (port == 0) return absl::OkStatus();
    if (port < 0 || port > 65535) {
      return loc.Error(task, "metrics_port", path,
                       absl::StrCat(port, " is not in 1..65535 (0: none)"));
    }
    std::string host;
    int grpc_port = 0;
    RETURN_IF_ERROR(SplitHostPort(address, &host, &grpc_port));
    const std::string key = absl::StrCat(host, ":", port);
    auto [it, inserted] = seen.emplace(key, task_name);
    if (!inserted) {
      return loc.Error(
          task, "metrics_port", path,
          absl::StrCat(port, " is already used on ", host, " by ", it->second));
    }
    return absl::OkStatus();
  };
  int own_checkpoint_dirs = 0;
  for (int i = 0; i < c.ps_size(); ++i) {
    const config::PsTask& p = c.ps(i);
    Locator loc = at.Nested(c, "ps", i);
    RETURN_IF_ERROR(check_address(p, p.address(), absl::StrCat("ps:", i), loc,
                                  absl::StrCat("ps[", i, "].address")));
    if (p.has_listen_address()) {
      std::string host;
      int port;
      if (absl::Status s = SplitHostPort(p.listen_address(), &host, &port);
          !s.ok()) {
        return loc.Error(p, "listen_address",
                         absl::StrCat("ps[", i, "].listen_address"),
                         s.message());
      }
    }
    if (p.has_checkpoint_dir()) {
      if (p.checkpoint_dir().empty()) {
        return loc.Error(p, "checkpoint_dir",
                         absl::StrCat("ps[", i, "].checkpoint_dir"), "empty");
      }
      ++own_checkpoint_dirs;
    }
  }
  if (own_checkpoint_dirs > 0 && own_checkpoint_dirs < c.ps_size()) {
    for (int i = 0; i < c.ps_size(); ++i) {
      if (c.ps(i).has_checkpoint_dir()) continue;
      return at.Nested(c, "ps", i)
          .Error(c.ps(i), "address", absl::StrCat("ps[", i, "].checkpoint_dir"),
                 absl::StrCat("missing: ", own_checkpoint_dirs, " of the ",
                              c.ps_size(),
                              " ps tasks have their own checkpoint "
                              "directory; give every ps task one, or none"));
    }
  }
  for (int i = 0; i < c.worker_size(); ++i) {
    const config::WorkerTask& w = c.worker(i);
    Locator loc = at.Nested(c, "worker", i);
    std::string path = absl::StrCat("worker[", i, "]");
    RETURN_IF_ERROR(check_address(w, w.address(), absl::StrCat("worker:", i),
                                  loc, path + ".address"));
    if (absl::StatusOr<int> d = ParseDevice(w.device()); !d.ok()) {
      return loc.Error(w, "device", path + ".device", d.status().message());
    }
    if (w.threads() < 1 || w.threads() > 256) {
      return loc.Error(w, "threads", path + ".threads",
                       absl::StrCat(w.threads(), " is not in 1..256"));
    }
  }
  // Metrics ports, once every task's address is known.
  for (int i = 0; i < c.ps_size(); ++i) {
    RETURN_IF_ERROR(check_metrics_port(
        c.ps(i), c.ps(i).metrics_port(), c.ps(i).address(),
        absl::StrCat("ps:", i, " (metrics)"), at.Nested(c, "ps", i),
        absl::StrCat("ps[", i, "].metrics_port")));
  }
  for (int i = 0; i < c.worker_size(); ++i) {
    RETURN_IF_ERROR(check_metrics_port(
        c.worker(i), c.worker(i).metrics_port(), c.worker(i).address(),
        absl::StrCat("worker:", i, " (metrics)"), at.Nested(c, "worker", i),
        absl::StrCat("worker[", i, "].metrics_port")));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimizer(const config::OptimizerConfig& o,
                               const Locator& at) {
  const absl::optional<OptimizerOptionProblem> bad = FindOptimizerOptionProblem(
      AdamHyper{o.learning_rate(), o.beta1(), o.beta2(), o.epsilon()},
      o.kind() == config::OptimizerConfig::ADAM);
  if (bad.has_value()) {
    return at.Error(
        o, bad->field, "training.optimizer." + bad->field,
        absl::StrCat(static_cast<float>(bad->value), " ", bad->rule));
  }
  absl::string_view kind = "adam";
  if (o.kind() == config::OptimizerConfig::SGD) kind = "sgd";
  if (o.kind() == config::OptimizerConfig::MOMENTUM) kind = "momentum";
  const absl::optional<OptimizerOptionProblem> sgd = FindSgdOptionProblem(
      SgdHyper{o.momentum(), o.nesterov(), o.weight_decay()}, kind);
  if (!sgd.has_value()) return absl::OkStatus();
  const std::string value = sgd->field == "nesterov"
                                ? "true"
                                : absl::StrCat(static_cast<float>(sgd->value));
  return at.Error(o, sgd->field, "training.optimizer." + sgd->field,
                  absl::StrCat(value, " ", sgd->rule));
}

absl::Status ValidateTraining(ClusterConfig& c, const Locator& root) {
  config::TrainingConfig& t = *c.mutable_training();
  Locator at = root.Nested(c, "training");
  const int workers = c.worker_size();
  if (!t.has_total_num_replicas()) t.set_total_num_replicas(workers);
  if (!t.has_replicas_to_aggregate()) {
    t.set_replicas_to_aggregate(t.total_num_replicas());
  }
  if (t.total_num_replicas() != workers) {
    return at.Error(t, "total_num_replicas", "training.total_num_replicas",
                    absl::StrCat(t.total_num_replicas(),
                                 " differs from the number of worker tasks (",
                                 workers, ")"));
  }
  // Across tasks: N of the worker tasks. N >= 1 and the async staleness
  // controls are ValidatePsOptions'.
  if (t.replicas_to_aggregate() > t.total_num_replicas()) {
    return at.Error(t, "replicas_to_aggregate",
                    "training.replicas_to_aggregate",
                    absl::StrCat(t.replicas_to_aggregate(),
                                 " is more than total_num_replicas (",
                                 t.total_num_replicas(), ")"));
  }
  if (!t.has_min_workers()) t.set_min_workers(t.total_num_replicas());
  if (t.min_workers() < 1 || t.min_workers() > t.total_num_replicas()) {
    return at.Error(
        t, "min_workers", "training.min_workers",
        absl::StrCat(t.min_workers(), " is not in 1..", t.total_num_replicas(),
                     " (total_num_replicas)"));
  }
  if (t.replicas_rule() == config::TrainingConfig::LIVE_MINUS_BACKUPS &&
      (t.mode() != config::TrainingConfig::SYNC || t.has_adaptive_backups())) {
    return at.Error(t, "replicas_rule", "training.replicas_rule",
                    "LIVE_MINUS_BACKUPS is for sync mode without "
                    "adaptive_backups (which choose N themselves)");
  }
  if (t.has_adaptive_backups()) {
    config::AdaptiveBackupsConfig& a = *t.mutable_adaptive_backups();
    const Locator in = at.Nested(t, "adaptive_backups");
    const std::string path = "training.adaptive_backups";
    if (t.mode() != config::TrainingConfig::SYNC) {
      return in.Error(a, "min_replicas", path,
                      "adaptive backup workers need mode: SYNC");
    }
    if (!a.has_max_replicas()) a.set_max_replicas(t.total_num_replicas());
    if (a.max_replicas() > t.total_num_replicas()) {
      return in.Error(
          a, "max_replicas", path + ".max_replicas",
          absl::StrCat(a.max_replicas(), " is more than total_num_replicas (",
                       t.total_num_replicas(), ")"));
    }
    if (a.min_replicas() < 1 || a.min_replicas() > a.max_replicas()) {
      return in.Error(a, "min_replicas", path + ".min_replicas",
                      absl::StrCat(a.min_replicas(), " is not in 1..",
                                   a.max_replicas(), " (max_replicas)"));
    }
    if (a.window_steps() < 1) {
      return in.Error(a, "window_steps", path + ".window_steps",
                      absl::StrCat(a.window_steps(), " is less than 1"));
    }
    if (a.warmup_steps() < 0) {
      return in.Error(a, "warmup_steps", path + ".warmup_steps",
                      absl::StrCat(a.warmup_steps(), " is negative"));
    }
  }
  if (t.batch_size() < 1 || t.batch_size() > 65536) {
    return at.Error(t, "batch_size", "training.batch_size",
                    absl::StrCat(t.batch_size(), " is not in 1..65536"));
  }
  RETURN_IF_ERROR(ValidateOptimizer(t.optimizer(), at.Nested(t, "optimizer")));
  if (t.has_steps() == t.has_epochs()) {
    return at.Error(t, t.has_steps() ? "epochs" : "steps", "training",
                    "set exactly one of steps and epochs");
  }
  if (t.optimizer().has_schedule()) {
    const config::LearningRateSchedule& ls = t.optimizer().schedule();
    const Locator in =
        at.Nested(t, "optimizer").Nested(t.optimizer(), "schedule");
    if (ls.has_base_batch_size() && ls.base_batch_size() < 1) {
      return in.Error(ls, "base_batch_size",
                      "training.optimizer.schedule.base_batch_size",
                      absl::StrCat(ls.base_batch_size(), " is less than 1"));
    }
    // Steps are the run's updates in sync mode; an async run of `steps`
    // global steps makes as many updates.
    const absl::optional<LrScheduleProblem> bad = FindLrScheduleProblem(
        LrScheduleFromConfig(t), t.has_steps() ? t.steps() : 0);
    if (bad.has_value()) {
      const std::string field =
          bad->field == "scale" ? "base_batch_size" : bad->field;
      return in.Error(ls, field, "training.optimizer.schedule." + field,
                      absl::StrCat(bad->value, " ", bad->rule));
    }
  }
  if (t.has_steps() && t.steps() < 1) {
    return at.Error(t, "steps", "training.steps",
                    absl::StrCat(t.steps(), " is less than 1"));
  }
  if (t.has_epochs() && (t.epochs() < 1 || t.epochs() > 100000)) {
    return at.Error(t, "epochs", "training.epochs",
                    absl::StrCat(t.epochs(), " is not in 1..100000"));
  }
  if (t.eval_every() < 0) {
    return at.Error(t, "eval_every", "training.eval_every",
                    absl::StrCat(t.eval_every(), " is negative"));
  }
  if (!(t.max_seconds() >= 0 && t.max_seconds() <= 1e7)) {
    return at.Error(t, "max_seconds", "training.max_seconds",
                    absl::StrCat(t.max_seconds(), " is not in [0, 1e7]"));
  }
  if (t.eval_examples() < 0) {
    return at.Error(t, "eval_examples", "training.eval_examples",
                    absl::StrCat(t.eval_examples(), " is negative"));
  }
  return absl::OkStatus();
}

// The values of the options a ps task takes from the config that
// ShardOptions also has (common/ps_option_rules.h).
PsOptionValues PsOptionValuesOf(const ClusterConfig& c) {
  const config::TrainingConfig& t = c.training();
  PsOptionValues v;
  v.async = t.mode() == config::TrainingConfig::ASYNC;
  v.adam = t.optimizer().kind() == config::OptimizerConfig::ADAM;
  v.replicas_to_aggregate = t.replicas_to_aggregate();
  if (t.has_staleness_bound()) v.staleness_bound = t.staleness_bound();
  if (t.has_max_push_staleness()) v.max_push_staleness = t.max_push_staleness();
  v.scale_lr_by_staleness = t.lr_scaled_by_staleness();
  v.dc_asgd_lambda = t.dc_asgd_lambda();
  if (t.has_async_beta1()) v.async_beta1 = t.async_beta1();
  v.worker_lease_seconds = c.worker_lease_seconds();
  if (c.has_checkpoint()) {
    v.checkpoint_every_steps = c.checkpoint().every_steps();
    v.checkpoint_keep = c.checkpoint().keep();
  }
  return v;
}

// FindPsOptionProblem's answer at the file, line and field of the config
// that set the value.
absl::Status ValidatePsOptions(const ClusterConfig& c, const Locator& root) {
  const absl::optional<PsOptionProblem> bad =
      FindPsOptionProblem(PsOptionValuesOf(c));
  if (!bad.has_value()) return absl::OkStatus();
  const std::string message =
      bad->out_of_range ? absl::StrCat(bad->value, " ", bad->rule) : bad->rule;
  if (bad->field == "worker_lease_seconds") {
    return root.Error(c, bad->field, bad->field, message);
  }
  if (absl::StartsWith(bad->field, "checkpoint.")) {
    const std::string name = bad->field.substr(sizeof("checkpoint.") - 1);
    return root.Nested(c, "checkpoint")
        .Error(c.checkpoint(), name, bad->field, message);
  }
  // The rest are training's; one has another name there.
  const std::string name = bad->field == "scale_lr_by_staleness"
                               ? "lr_scaled_by_staleness"
                               : bad->field;
  return root.Nested(c, "training")
      .Error(c.training(), name, "training." + name, message);
}

absl::Status ValidateData(const ClusterConfig& c, const Locator& root) {
  const config::DataConfig& d = c.data();
  Locator at = root.Nested(c, "data");
  if (d.source() == config::DataConfig::CIFAR10 && d.dir().empty()) {
    return at.Error(d, "dir", "data.dir",
                    "missing: CIFAR10 needs the directory of its .bin files "
                    "(or use source: SYNTHETIC)");
  }
  if (d.synthetic_train_size() < 1) {
    return at.Error(d, "synthetic_train_size", "data.synthetic_train_size",
                    absl::StrCat(d.synthetic_train_size(), " is less than 1"));
  }
  if (d.synthetic_test_size() < 1) {
    return at.Error(d, "synthetic_test_size", "data.synthetic_test_size",
                    absl::StrCat(d.synthetic_test_size(), " is less than 1"));
  }
  const bool servers = d.sharding() == config::DataConfig::SERVERS;
  if (c.has_max_workers() && c.max_workers() < c.worker_size()) {
    return root.Error(c, "max_workers", "max_workers",
                      absl::StrCat(c.max_workers(), " is below the ",
                                   c.worker_size(), " listed worker tasks"));
  }
  if (c.has_max_workers() && c.max_workers() > 4096) {
    return root.Error(c, "max_workers", "max_workers",
                      absl::StrCat(c.max_workers(), " is more than 4096"));
  }
  if (c.max_workers() > c.worker_size() &&
      d.sharding() == config::DataConfig::SHARD) {
    return at.Error(d, "sharding", "data.sharding",
                    "SHARD splits the data among the listed workers: elastic "
                    "workers (max_workers) need SERVERS or OWN_ORDER");
  }
  if (d.has_num_samples() && !servers) {
    return at.Error(d, "num_samples", "data.num_samples",
                    "is for sharding: SERVERS (the servers hand out the data)");
  }
  if (d.num_samples() < 0) {
    return at.Error(d, "num_samples", "data.num_samples",
                    absl::StrCat(d.num_samples(),
                                 " is negative (0: the "
                                 "source's training set)"));
  }
  if (d.ledger() && !servers) {
    return at.Error(d, "ledger", "data.ledger",
                    "is for sharding: SERVERS (the servers hand out the data)");
  }
  if (d.record_samples() && !servers) {
    return at.Error(d, "record_samples", "data.record_samples",
                    "is for sharding: SERVERS (the servers hand out the data)");
  }
  if (d.ledger() && !c.has_checkpoint()) {
    return at.Error(
        d, "ledger", "data.ledger",
        "needs a checkpoint block: the ledger is kept beside ps:0's "
        "checkpoints and cut back with them");
  }
  if (servers && TrainingSamples(c) < c.training().batch_size()) {
    return at.Error(
        d, "sharding", "data.sharding",
        absl::StrCat("SERVERS: the training set's ", TrainingSamples(c),
                     " samples are fewer than one batch of ",
                     c.training().batch_size()));
  }
  return absl::OkStatus();
}

absl::Status ValidateDelay(const config::DelayDistribution& d,
                           const Locator& at, const std::string& path) {
  auto non_negative = [&](absl::string_view field,
                          double value) -> absl::Status {
    if (!std::isfinite(value) || value < 0) {
      return at.Error(d, field, absl::StrCat(path, ".", field),
                      absl::StrCat(value, " is not a finite number >= 0"));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(non_negative("shift_seconds", d.shift_seconds()));
  RETURN_IF_ERROR(non_negative("mean_seconds", d.mean_seconds()));
  RETURN_IF_ERROR(non_negative("scale_seconds", d.scale_seconds()));
  if (d.kind() == config::DelayDistribution::SHIFTED_EXPONENTIAL &&
      d.mean_seconds() <= 0) {
    return at.Error(d, "mean_seconds", absl::StrCat(path, ".mean_seconds"),
                    "must be > 0 for SHIFTED_EXPONENTIAL");
  }
  if (d.kind() == config::DelayDistribution::PARETO) {
    if (d.scale_seconds() <= 0) {
      return at.Error(d, "scale_seconds", absl::StrCat(path, ".scale_seconds"),
                      "must be > 0 for PARETO");
    }
    if (!std::isfinite(d.alpha()) || d.alpha() <= 0) {
      return at.Error(d, "alpha", absl::StrCat(path, ".alpha"),
                      absl::StrCat(d.alpha(), " is not > 0"));
    }
  }
  return absl::OkStatus();
}

// Straggler emulation and emulated compute (docs/STRAGGLERS.md).
absl::Status ValidateEmulation(const ClusterConfig& c, const Locator& root) {
  for (int i = 0; i < c.stragglers_size(); ++i) {
    const config::StragglerConfig& s = c.stragglers(i);
    const Locator at = root.Nested(c, "stragglers", i);
    const std::string path = absl::StrCat("stragglers[", i, "]");
    for (int k = 0; k < s.workers_size(); ++k) {
      if (s.workers(k) < 0 || s.workers(k) >= c.worker_size()) {
        return at.Error(
            s, "workers", absl::StrCat(path, ".workers"),
            absl::StrCat("worker ", s.workers(k), " is not among the config's ",
                         c.worker_size(), " workers"),
            k);
      }
    }
    if (!std::isfinite(s.slow_factor()) || s.slow_factor() < 1) {
      return at.Error(s, "slow_factor", absl::StrCat(path, ".slow_factor"),
                      absl::StrCat(s.slow_factor(), " is not a number >= 1"));
    }
    if (!(s.stall_probability() >= 0 && s.stall_probability() <= 1)) {
      return at.Error(s, "stall_probability",
                      absl::StrCat(path, ".stall_probability"),
                      absl::StrCat(s.stall_probability(), " is not in [0, 1]"));
    }
    for (auto [field, value] :
         {std::pair<absl::string_view, float>{"stall_seconds",
                                              s.stall_seconds()},
          {"transfer_delay_seconds", s.transfer_delay_seconds()}}) {
      if (!std::isfinite(value) || value < 0) {
        return at.Error(s, field, absl::StrCat(path, ".", field),
                        absl::StrCat(value, " is not a finite number >= 0"));
      }
    }
    if (s.has_extra_delay()) {
      RETURN_IF_ERROR(ValidateDelay(s.extra_delay(),
                                    at.Nested(s, "extra_delay"),
                                    absl::StrCat(path, ".extra_delay")));
    }
  }
  if (!c.has_emulation()) return absl::OkStatus();
  const config::EmulationConfig& e = c.emulation();
  const Locator at = root.Nested(c, "emulation");
  if (e.has_compute() == !e.compute_samples_file().empty()) {
    return at.Error(e, e.has_compute() ? "compute_samples_file" : "compute",
                    "emulation",
                    "set exactly one of compute and compute_samples_file");
  }
  if (e.has_compute()) {
    RETURN_IF_ERROR(ValidateDelay(e.compute(), at.Nested(e, "compute"),
                                  "emulation.compute"));
  }
  if (c.training().has_epochs()) {
    return at.Error(e, e.has_compute() ? "compute" : "compute_samples_file",
                    "emulation",
                    "an emulated worker reads no data, so training.epochs "
                    "means nothing: set training.steps (or max_seconds)");
  }
  // kExternalModel (worker/session/session_config.h).
  if (c.model().name() == "external") {
    return at.Error(e, e.has_compute() ? "compute" : "compute_samples_file",
                    "emulation",
                    "emulated compute replaces the C++ worker's model; "
                    "model 'external' computes in its own program");
  }
  return absl::OkStatus();
}

absl::Status ValidateCheckpoint(const ClusterConfig& c, const Locator& root) {
  if (!c.has_checkpoint()) {
    for (int i = 0; i < c.ps_size(); ++i) {
      if (!c.ps(i).has_checkpoint_dir()) continue;
      return root.Nested(c, "ps", i)
          .Error(c.ps(i), "checkpoint_dir",
                 absl::StrCat("ps[", i, "].checkpoint_dir"),
                 "set, but the config has no checkpoint { every_steps ... } "
                 "block that says when to save");
    }
    return absl::OkStatus();
  }
  const config::CheckpointConfig& k = c.checkpoint();
  Locator at = root.Nested(c, "checkpoint");
  if (k.dir().empty() && !PerHostCheckpoints(c)) {
    return at.Error(k, "dir", "checkpoint.dir",
                    "missing: the directory the checkpoints go to (or give "
                    "every ps task its own checkpoint_dir)");
  }
  if (!(k.every_seconds() >= 0 && k.every_seconds() <= 1e6)) {
    return at.Error(k, "every_seconds", "checkpoint.every_seconds",
                    absl::StrCat(k.every_seconds(),
                                 " is not in [0, 1e6] (0: not by time)"));
  }
  return absl::OkStatus();
}

// The names UCX_TLS takes (UCX 1.13's transports and aliases, and the newer
// srd and gga): a config's ucx_transports is checked against them when it is
// loaded, since UCX itself cannot tell a typo from a transport this host
// lacks (both make it refuse to start, and the data plane falls back to
// gRPC).
constexpr absl::string_view kUcxTransportNames[] = {
    "all",       "self",     "tcp",       "sm",       "shm",       "mm",
    "posix",     "sysv",     "xpmem",     "knem",     "cma",       "ib",
    "rc",        "rc_v",     "rc_x",      "rc_verbs", "rc_mlx5",   "ud",
    "ud_v",      "ud_x",     "ud_verbs",  "ud_mlx5",  "dc",        "dc_x",
    "dc_mlx5",   "rdmacm",   "sockcm",    "ugni",     "ugni_smsg", "ugni_udt",
    "ugni_rdma", "cuda",     "cuda_copy", "cuda_ipc", "gdr_copy",  "rocm",
    "rocm_copy", "rocm_ipc", "rocm_gdr",  "srd",      "gga"};

// wire.ucx_transports: "" (UCX's choice) or a comma-separated list of
// transport names, each optionally ":aux", the list optionally after "^"
// (all but those), as UCX_TLS.
absl::Status ValidateWire(const ClusterConfig& c, const Locator& root) {
  const std::string& tls = c.wire().ucx_transports();
  if (tls.empty()) return absl::OkStatus();
  absl::string_view list = tls;
  absl::ConsumePrefix(&list, "^");
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    absl::string_view bare = name;
    absl::ConsumeSuffix(&bare, ":aux");
    bool known = false;
    for (absl::string_view k : kUcxTransportNames) known |= bare == k;
    if (known) continue;
    return root.Nested(c, "wire").Error(
        c.wire(), "ucx_transports", "wire.ucx_transports",
        absl::StrCat(
            "'", name, "' in '", tls,
            "' is not a UCX transport name (UCX_TLS takes a comma-separated "
            "list of: ",
            absl::StrJoin(kUcxTransportNames, ", "),
            "; \"\" lets UCX choose)"));
  }
  return absl::OkStatus();
}

// OK when `path` is a regular file this process can open.
bool ReadableFile(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) &&
         std::ifstream(path).is_open();
}

// OK for a registry network or "external" (common/model_names.h).
absl::Status CheckModelName(absl::string_view name) {
  if (name == kExternalModelName) return absl::OkStatus();
  for (absl::string_view known : kRegistryModelNames) {
    if (name == known) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model '", name,
      "' (known: ", absl::StrJoin(kRegistryModelNames, ", "), "; or \"",
      kExternalModelName, "\" for a worker program's own model)"));
}

// Checks the security block and puts the cluster's token into token: the
// one given, the one in token_file, or the default token file's (made when
// absent) unless the block says insecure.
absl::Status ValidateSecurity(ClusterConfig& c, const Locator& root) {
  config::SecurityConfig& s = *c.mutable_security();
  Locator at = root.Nested(c, "security");
  if (s.has_token() && s.has_token_file()) {
    return at.Error(s, "token_file", "security.token_file",
                    "set either token or token_file, not both");
  }
  if (s.insecure() && (s.has_token() || s.has_token_file())) {
    return at.Error(s, "insecure", "security.insecure",
                    "insecure: true means no token: drop token/token_file, "
                    "or drop insecure");
  }
  if (s.has_peer_token_file() &&
      (s.insecure() || s.peer_token_file().empty())) {
    return at.Error(s, "peer_token_file", "security.peer_token_file",
                    s.insecure() ? "insecure: true means no token: drop "
                                   "peer_token_file, or drop insecure"
                                 : "an empty file name");
  }
  TokenSource source;
  if (s.has_token()) source.token = s.token();
  source.token_file = s.token_file();
  source.insecure = s.insecure();
  absl::StatusOr<ClusterToken> token = ResolveClusterToken(c.name(), source);
  if (!token.ok()) {
    if (s.has_token()) {
      return at.Error(s, "token", "security.token", token.status().message());
    }
    if (s.has_token_file()) {
      return at.Error(s, "token_file", "security.token_file",
                      token.status().message());
    }
    return root.Error(c, "security", "security", token.status().message());
  }
  if (!s.has_token() && !s.insecure()) {
    s.set_token(token->token);
    // Where it came from (the default token's file too), so that the
    // resolved config a run directory keeps (cluster.pbtxt) names the file,
    // not the token.
    s.set_token_file(token->file);
  }
  if (s.has_tls()) {
    const config::TlsConfig& tls = s.tls();
    Locator tls_at = at.Nested(s, "tls");
    const struct {
      const char* field;
      const std::string& path;
      bool required;
    } files[] = {{"cert_file", tls.cert_file(), true},
                 {"key_file", tls.key_file(), true},
                 {"ca_file", tls.ca_file(), false}};
    for (const auto& f : files) {
      const std::string name = absl::StrCat("security.tls.", f.field);
      if (f.path.empty() && f.required) {
        return tls_at.Error(tls, f.field, name, "missing (a PEM file)");
      }
      if (!f.path.empty() && !ReadableFile(f.path)) {
        return tls_at.Error(tls, f.field, name,
                            absl::StrCat("cannot read '", f.path, "'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SplitHostPort(absl::string_view address, std::string* host,
                           int* port) {
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not host:port"));
  }
  absl::string_view p = address.substr(colon + 1);
  int value = 0;
  if (!absl::SimpleAtoi(p, &value) || value < 1 || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' has port '", p, "' (expected 1..65535)"));
  }
  absl::string_view h = address.substr(0, colon);
  if (absl::StrContains(h, ':') &&
      !(h.size() > 2 && h.front() == '[' && h.back() == ']')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", address, "': an IPv6 address goes in brackets, as '[::1]:2222'"));
  }
  if (h.front() == '[' || h.back() == ']') {
    if (!(h.size() > 2 && h.front() == '[' && h.back() == ']' &&
          absl::StrContains(h, ':'))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", address, "': only an IPv6 address goes in brackets"));
    }
  }
  *host = std::string(h);
  *port = value;
  return absl::OkStatus();
}

absl::StatusOr<int> ParseDevice(absl::string_view device) {
  if (device == "cpu") return -1;
  int k = 0;
  if (absl::StartsWith(device, "gpu:") &&
      absl::SimpleAtoi(device.substr(4), &k) && k >= 0 && k < 1024) {
    return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "device '", device, "' is not 'cpu' or 'gpu:K' (K a GPU index)"));
}

LrSchedule LrScheduleFromConfig(const config::TrainingConfig& t) {
  const config::LearningRateSchedule& ls = t.optimizer().schedule();
  LrSchedule s;
  if (ls.has_base_batch_size() && ls.base_batch_size() > 0) {
    const int64_t per_update =
        int64_t{t.batch_size()} * (t.mode() == config::TrainingConfig::SYNC
                                       ? t.replicas_to_aggregate()
                                       : 1);
    s.scale = static_cast<double>(per_update) / ls.base_batch_size();
  }
  s.warmup_steps = ls.warmup_steps();
  s.warmup_from = ls.warmup_from();
  switch (ls.decay()) {
    case config::LearningRateSchedule::CONSTANT:
      s.decay = LrSchedule::Decay::kConstant;
      break;
    case config::LearningRateSchedule::STEP:
      s.decay = LrSchedule::Decay::kStep;
      break;
    case config::LearningRateSchedule::COSINE:
      s.decay = LrSchedule::Decay::kCosine;
      break;
  }
  s.decay_every = ls.decay_every();
  s.decay_factor = ls.decay_factor();
  s.decay_steps = ls.decay_steps();
  s.final_factor = ls.final_factor();
  return s;
}

bool PerHostCheckpoints(const ClusterConfig& config) {
  for (const config::PsTask& p : config.ps()) {
    if (p.has_checkpoint_dir()) return true;
  }
  return false;
}

std::string ListenAddress(const config::PsTask& task) {
  return task.has_listen_address() ? task.listen_address() : task.address();
}

std::string CheckpointDir(const ClusterConfig& config, int ps_index) {
  if (!config.has_checkpoint()) return "";
  const config::PsTask& p = config.ps(ps_index);
  return p.has_checkpoint_dir() ? p.checkpoint_dir()
                                : config.checkpoint().dir();
}

SecurityOptions SecurityFromConfig(const ClusterConfig& config) {
  SecurityOptions o;
  const config::SecurityConfig& s = config.security();
  o.token = s.token();
  o.insecure = s.insecure();
  o.tls = s.has_tls();
  o.tls_cert_file = s.tls().cert_file();
  o.tls_key_file = s.tls().key_file();
  o.tls_ca_file = s.tls().ca_file();
  return o;
}

std::string TaskId::ToString() const {
  return absl::StrCat(kind == Kind::kPs ? "ps:" : "worker:", index);
}

absl::StatusOr<TaskId> ParseTaskId(absl::string_view text,
                                   const ClusterConfig& config) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  TaskId id;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &id.index) ||
      (parts[0] != "ps" && parts[0] != "worker")) {
    return absl::InvalidArgumentError(
        absl::StrCat("task '", text, "' is not ps:I or worker:J"));
  }
  id.kind = parts[0] == "ps" ? TaskId::Kind::kPs : TaskId::Kind::kWorker;
  int count =
      id.kind == TaskId::Kind::kPs ? config.ps_size() : MaxWorkers(config);
  if (id.index < 0 || id.index >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task '", text, "' is not in cluster '", config.name(), "', which has ",
        count, " ", parts[0], " task", count == 1 ? "" : "s", " (", parts[0],
        ":0..", parts[0], ":", count - 1, ")"));
  }
  return id;
}

absl::StatusOr<ClusterConfig> ParseClusterConfig(absl::string_view text,
                                                 absl::string_view filename) {
  ClusterConfig config;
  TextFormat::Parser parser;
  FirstError errors;
  TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ":", errors.line_, ": ",
                     errors.has_error_ ? errors.message_ : "cannot parse"));
  }
  Locator at(filename, &tree);
  if (!IsValidClusterName(config.name())) {
    return at.Error(
        config, "name", "name",
        absl::StrCat("'", config.name(), "' is not ", kClusterNameRule));
  }
  RETURN_IF_ERROR(ValidateTasks(config, at));
  RETURN_IF_ERROR(ValidateTraining(config, at));
  RETURN_IF_ERROR(ValidatePsOptions(config, at));
  if (config.model().name().empty()) {
    return at.Nested(config, "model")
        .Error(config.model(), "name", "model.name", "empty");
  }
  if (absl::Status known = CheckModelName(config.model().name()); !known.ok()) {
    return at.Nested(config, "model")
        .Error(config.model(), "name", "model.name", known.message());
  }
  RETURN_IF_ERROR(ValidateData(config, at));
  if (config.run_root().empty()) {
    return at.Error(config, "run_root", "run_root", "empty");
  }
  RETURN_IF_ERROR(ValidateCheckpoint(config, at));
  RETURN_IF_ERROR(ValidateEmulation(config, at));
  RETURN_IF_ERROR(ValidateWire(config, at));
  if (!(config.ps_unavailable_timeout_seconds() >= 0 &&
        config.ps_unavailable_timeout_seconds() <= 86400)) {
    return at.Error(config, "ps_unavailable_timeout_seconds",
                    "ps_unavailable_timeout_seconds",
                    absl::StrCat(config.ps_unavailable_timeout_seconds(),
                                 " is not in [0, 86400]"));
  }
  RETURN_IF_ERROR(ValidateSecurity(config, at));
  return config;
}

int MaxWorkers(const ClusterConfig& config) {
  return config.has_max_workers() ? config.max_workers() : config.worker_size();
}

const config::WorkerTask& WorkerTaskOf(const ClusterConfig& config, int index) {
  return config.worker(std::min(index, config.worker_size() - 1));
}

int64_t TrainingSamples(const ClusterConfig& config) {
  const config::DataConfig& d = config.data();
  if (d.num_samples() > 0) return d.num_samples();
  return d.source() == config::DataConfig::CIFAR10 ? 50000
                                                   : d.synthetic_train_size();
}

absl::StatusOr<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read cluster config '", path, "'"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseClusterConfig(buffer.str(), path);
}

}  // namespace psgd
