#include "ps/server/server_lifecycle.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/lr_schedule.h"
#include "ps/server/prometheus_page.h"
#include "ps/server/server_metrics.h"
#include "ps/server/slow_step.h"

namespace psgd {
namespace ps {
namespace {

absl::Status Bad(absl::string_view field, absl::Duration value,
                 absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "lifecycle option ", field, "=", absl::FormatDuration(value), ": ", why));
}

bool PositiveFinite(absl::Duration d) {
  return d > absl::ZeroDuration() && d < absl::InfiniteDuration();
}

// Logs what the shard restored at start.
void LogRestore(const ShardOptions& options,
                const ParameterShard::RestoreReport& r) {
  if (options.checkpoint.dir.empty()) return;
  for (const std::string& line : r.refused) spdlog::warn("{}", line);
  if (r.label < 0) {
    spdlog::info("no complete checkpoint in {}: starting empty",
                 options.checkpoint.dir);
    return;
  }
  spdlog::warn(
      "restored checkpoint step-{} (step {}, generation {}, state digest "
      "{:08x}) from {}; refusing pushes and pulls until the workers roll the "
      "cluster back to it",
      r.label, r.step, r.generation, r.digest, options.checkpoint.dir);
}

}  // namespace

absl::Status ValidateLifecycleOptions(const LifecycleOptions& o) {
  if (o.slow_step < absl::ZeroDuration() ||
      o.slow_step == absl::InfiniteDuration()) {
    return Bad("slow_step", o.slow_step, "must be finite and >= 0 (0: never)");
  }
  if (!PositiveFinite(o.tick)) {
    return Bad("tick", o.tick, "must be positive and finite");
  }
  if (!PositiveFinite(o.metrics_every)) {
    return Bad("metrics_every", o.metrics_every, "must be positive and finite");
  }
  return absl::OkStatus();
}

class ShardLifecycle::State {
 public:
  State(int shard_index, absl::Duration slow_step)
      : metrics(shard_index), slow_steps(slow_step) {}

  ServerMetricsWriter metrics;
  absl::Time next_metrics = absl::InfinitePast();
  SlowStepLog slow_steps;
  // What has been logged: checkpoint failures, rollbacks, refused calls.
  int64_t checkpoint_failures = 0;
  size_t rollbacks = 0;
  int64_t unauthenticated = 0;
  // Refused calls are logged at most every 10 s (a scanner could send many).
  absl::Time next_auth_log = absl::InfinitePast();
};

ShardLifecycle::ShardLifecycle(ParameterShard* shard,
                               const ServingCounters* counters,
                               const LifecycleOptions& options)
    : shard_(shard),
      counters_(counters),
      options_(options),
      state_(std::make_unique<State>(shard->options().shard_index,
                                     options.slow_step)) {}

absl::StatusOr<std::unique_ptr<ShardLifecycle>> ShardLifecycle::Start(
    ParameterShard* shard, const ServingCounters* counters,
    const LifecycleOptions& options, const MetricsPageOptions& page) {
  if (absl::Status s = ValidateLifecycleOptions(options); !s.ok()) return s;
  std::unique_ptr<ShardLifecycle> l(
      new ShardLifecycle(shard, counters, options));
  const ShardOptions& o = shard->options();
  spdlog::info("{} learning rate {} ({})",
               std::string(OptimizerKindName(o.optimizer.kind)),
               o.optimizer.learning_rate,
               LrScheduleToString(o.optimizer.schedule));
  if (page.port > 0) {
    const std::string& host = page.host;
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
        MetricsHttpServer::Start(
            host, page.port,
            [shard, counters] {
              return ShardMetricsText(
                  shard->Status(),
                  counters != nullptr ? counters->payload_sent_bytes() : 0,
                  counters != nullptr ? counters->payload_received_bytes() : 0);
            },
            page.token);
    if (!started.ok()) {
      return absl::Status(
          started.status().code(),
          absl::StrCat("ps:", o.shard_index, ": cannot serve its metrics: ",
                       started.status().message()));
    }
    l->prometheus_ = *std::move(started);
    spdlog::info("Prometheus metrics on http://{}:{}/metrics", host,
                 l->prometheus_->port());
  }
  LogRestore(o, shard->restore_report());
  // The rollbacks a restored shard knew of are not news.
  l->LogCheckpoints(shard->Status());
  l->thread_ = std::thread([raw = l.get()] { raw->Loop(); });
  return l;
}

ShardLifecycle::~ShardLifecycle() { Stop("the server is stopping"); }

int ShardLifecycle::metrics_port() const {
  return prometheus_ != nullptr ? prometheus_->port() : 0;
}

void ShardLifecycle::Loop() {
  while (true) {
    const absl::Time now = absl::Now();
    Tick(now);
    MutexLock lock(&mu_);
    const bool stopping = stop_cv_.WaitUntil(&mu_, now + options_.tick, [this] {
      mu_.AssertHeld();
      return stopping_;
    });
    if (stopping) return;
  }
}

void ShardLifecycle::Tick(absl::Time now) {
  State& s = *state_;
  const ShardStatus status = shard_->Status();
  if (now >= s.next_metrics) {
    s.next_metrics = now + options_.metrics_every;
    // The serving layer's memory, only for the lines written (the loop's
    // other checks do not need it).
    WriteMetrics(WithServingMemory(status));
  }
  LogCheckpoints(status);
  if (const std::string slow = s.slow_steps.Check(status, now); !slow.empty()) {
    spdlog::warn("{}", slow);
  }
  if (counters_ != nullptr) {
    if (const int64_t n = counters_->unauthenticated_calls();
        n > s.unauthenticated && now >= s.next_auth_log) {
      spdlog::warn("refused {} call(s) without the cluster's token ({} so far)",
                   n - s.unauthenticated, n);
      s.unauthenticated = n;
      s.next_auth_log = now + absl::Seconds(10);
    }
  }
  for (int worker : shard_->ExpireWorkers(now)) {
    spdlog::warn("worker {} sent nothing for {} and left the live set (lease)",
                 worker, absl::FormatDuration(shard_->options().worker_lease));
  }
}

void ShardLifecycle::LogCheckpoints(const ShardStatus& st) {
  State& s = *state_;
  if (st.checkpoint_failures > s.checkpoint_failures) {
    spdlog::error("checkpoint failed ({} so far): {}", st.checkpoint_failures,
                  st.last_checkpoint_error);
    s.checkpoint_failures = st.checkpoint_failures;
  }
  for (size_t i = s.rollbacks; i < st.rollbacks.size(); ++i) {
    const RollbackRecord& r = st.rollbacks[i];
    spdlog::warn(
        "rolled back from step {} to checkpoint step-{} (step {}); "
        "generation {}",
        r.from_step, r.label, r.to_step, r.generation);
  }
  s.rollbacks = std::max(s.rollbacks, st.rollbacks.size());
}

ShardStatus ShardLifecycle::WithServingMemory(ShardStatus status) const {
  if (counters_ != nullptr) counters_->AddServingMemory(&status.memory);
  return status;
}

void ShardLifecycle::WriteMetrics(const ShardStatus& status) {
  std::string dir = options_.run_dir;
  if (dir.empty() && counters_ != nullptr) dir = counters_->run_dir();
  state_->metrics.Write(
      dir, status, counters_ != nullptr ? counters_->payload_sent_bytes() : 0,
      counters_ != nullptr ? counters_->payload_received_bytes() : 0);
}

void ShardLifecycle::Stop(absl::string_view reason) {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    stop_cv_.SignalAll();
  }
  if (!thread_.joinable()) return;  // Start failed
  thread_.join();
  // The loop has ended: its state is this thread's now.
  shard_->FlushCheckpoints();
  const ShardStatus status = WithServingMemory(shard_->Status());
  WriteMetrics(status);
  state_->metrics.WriteSummary(status, std::string(reason),
                               [this](JsonObject* summary) {
                                 if (counters_ != nullptr)
                                   counters_->AddSummary(summary);
                               });
  LogCheckpoints(status);
  const ShardOptions& o = shard_->options();
  if (!o.checkpoint.dir.empty()) {
    const bool failed = status.checkpoint_failures > 0;
    auto label = [](int64_t l) {
      return l < 0 ? std::string("none") : absl::StrCat("step-", l);
    };
    spdlog::log(failed ? spdlog::level::err : spdlog::level::info,
                "{} checkpoints written, the last {}, the newest complete "
                "{}; {} failed{}{}",
                status.checkpoints_written, label(status.last_checkpoint_label),
                label(status.last_complete_checkpoint_label),
                status.checkpoint_failures, failed ? ": " : "",
                status.last_checkpoint_error);
  }
  spdlog::info(
      "stopped at step {}: {} applied, {} aggregated, {} stale, {} "
      "surplus, {} refused; {} call(s) without the cluster's token",
      status.step, status.counters.applied, status.counters.aggregated,
      status.counters.dropped_stale, status.counters.dropped_surplus,
      status.counters.refused,
      counters_ != nullptr ? counters_->unauthenticated_calls() : 0);
}

}  // namespace ps
}  // namespace psgd
