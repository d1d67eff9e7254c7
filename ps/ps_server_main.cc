// ps_server: one parameter-server shard as a process.
//
//   ps_server --config=configs/sync_2ps_4workers.pbtxt --task=ps:0
//   ps_server --listen_address=0.0.0.0:2222 --shard_index=0 --num_shards=2
//       --cluster_name=cifar --mode=sync --replicas_to_aggregate=3
//       --total_num_replicas=4
//
// Serves until a Shutdown RPC (training is over) or SIGINT / SIGTERM, then
// stops cleanly (waiting pulls end, calls in flight get 5 s) and exits 0.
// Exits 2 for bad flags or config, 1 when it cannot start.
//
// Once it knows the run directory (--run_dir, or the one the chief sends
// with Initialize) it writes ps-I.jsonl there, a "server" line with its
// step and push counters every 2 s, and ps-I.summary.json when it stops.
// A restarted server appends to ps-I.jsonl.
//
// With a checkpoint directory in the config it restores the newest complete
// checkpoint at start (and logs each newer one it refused, with the file and
// the reason), saves checkpoints while it serves and its final state when it
// stops (docs/RELIABILITY.md).
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>

#include <algorithm>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_flags.h"
#include "common/event_file.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/prometheus.h"
#include "ps/server/grpc_server.h"
#include "ps/server/prometheus_page.h"
#include "ps/server/server_flags.h"
#include "ps/server/slow_step.h"

ABSL_FLAG(double, slow_step_seconds, 10,
          "Log which workers a sync step waits for once it has waited this "
          "long (0: never).");

namespace {

// SIGINT and SIGTERM, blocked in every thread (they inherit the mask) and
// taken by the main thread with sigtimedwait.
sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

psgd::JsonObject StatusJson(const std::string& task,
                            const psgd::ps::ShardStatus& s,
                            double wall_time_s) {
  psgd::JsonObject j;
  j.Set("kind", "server")
      .Set("task", task)
      .Set("wall_time_s", wall_time_s)
      .Set("unix_time", absl::ToUnixMicros(absl::Now()) / 1e6)
      .Set("step", s.step)
      .Set("aggregated", s.counters.aggregated)
      .Set("applied", s.counters.applied)
      .Set("dropped_stale", s.counters.dropped_stale)
      .Set("dropped_surplus", s.counters.dropped_surplus)
      .Set("refused", s.counters.refused)
      .Set("refused_too_stale", s.counters.refused_too_stale)
      .Set("completed_by_leave", s.counters.completed_by_leave)
      .Set("ssp_blocked_pulls", s.ssp_blocked_pulls)
      .Set("ssp_blocked_s", s.ssp_blocked_seconds)
      .Set("dc_compensated", s.dc_compensated)
      .Set("dc_uncompensated", s.dc_uncompensated)
      .Set("live_workers", static_cast<int64_t>(s.live_workers.size()))
      .Set("workers_expired", s.workers_expired)
      .Set("pending_gradients", s.pending_gradients)
      .Set("generation", s.generation)
      .Set("restored_label", s.restored_label)
      .Set("rollbacks", static_cast<int64_t>(s.rollbacks.size()))
      .Set("checkpoints_written", s.checkpoints_written)
      .Set("checkpoint_failures", s.checkpoint_failures)
      .Set("last_checkpoint_label", s.last_checkpoint_label);
  std::string hist;
  for (const auto& [staleness, count] : s.staleness_histogram) {
    absl::StrAppend(&hist, hist.empty() ? "" : ",", staleness, ":", count);
  }
  j.Set("staleness_histogram", hist);
  return j;
}

// ps-I.jsonl in the run directory, opened once the directory is known.
class ServerMetrics {
 public:
  ServerMetrics(psgd::ps::PsGrpcServer* server, std::string task, int index)
      : server_(server),
        task_(std::move(task)),
        index_(index),
        start_(absl::Now()) {}

  void Tick() {
    if (absl::Now() < next_) return;
    next_ = absl::Now() + absl::Seconds(2);
    Write();
  }

  // The last line and the summary.
  void Finish(const std::string& reason) {
    Write();
    if (writer_ == nullptr) return;
    psgd::JsonObject summary = StatusJson(
        task_, server_->shard()->Status(), absl::ToDoubleSeconds(absl::Now() - start_));
    summary.Set("kind", "server_summary").Set("stop_reason", reason);
    absl::Status s = psgd::WriteJsonFile(
        absl::StrCat(dir_, "/ps-", index_, ".summary.json"), summary);
    if (!s.ok()) spdlog::warn("{}", s.ToString());
  }

 private:
  void Write() {
    if (writer_ == nullptr && !Open()) return;
    const psgd::ps::ShardStatus status = server_->shard()->Status();
    // Payload bytes since the last line (per-task network figures).
    const int64_t sent = server_->service()->payload_sent_bytes();
    const int64_t received = server_->service()->payload_received_bytes();
    psgd::JsonObject line =
        StatusJson(task_, status, absl::ToDoubleSeconds(absl::Now() - start_));
    line.Set("sent_bytes", sent - last_sent_)
        .Set("received_bytes", received - last_received_);
    last_sent_ = sent;
    last_received_ = received;
    absl::Status s = writer_->Write(line);
    if (!s.ok()) spdlog::warn("{}", s.ToString());
    if (events_ != nullptr) WriteEvents(status);
  }

  // The same figures as TensorBoard scalars, at the shard's step.
  void WriteEvents(const psgd::ps::ShardStatus& st) {
    const double now = absl::ToUnixMicros(absl::Now()) / 1e6;
    const std::string p = absl::StrCat("ps", index_, "/");
    const std::pair<const char*, double> scalars[] = {
        {"pushes_applied", static_cast<double>(st.counters.applied)},
        {"pushes_aggregated", static_cast<double>(st.counters.aggregated)},
        {"pushes_dropped_stale", static_cast<double>(st.counters.dropped_stale)},
        {"pushes_dropped_surplus",
         static_cast<double>(st.counters.dropped_surplus)},
        {"pushes_refused", static_cast<double>(st.counters.refused)},
        {"live_workers", static_cast<double>(st.live_workers.size())},
        {"pending_gradients", static_cast<double>(st.pending_gradients)},
    };
    absl::Status s;
    for (const auto& [tag, value] : scalars) {
      s.Update(events_->WriteScalar(p + tag, st.step, value, now));
    }
    int64_t pushes = 0, total = 0;
    for (const auto& [staleness, count] : st.staleness_histogram) {
      pushes += count;
      total += staleness * count;
    }
    if (pushes > 0) {
      s.Update(events_->WriteScalar(p + "staleness_mean", st.step,
                                    static_cast<double>(total) / pushes, now));
    }
    s.Update(events_->Flush());
    if (!s.ok()) spdlog::warn("{}", s.ToString());
  }

  bool Open() {
    if (failed_) return false;
    std::string dir = server_->service()->run_dir();
    if (dir.empty()) return false;
    absl::StatusOr<std::string> made =
        psgd::CreateRunDir(dir, "", "", absl::Now());
    absl::StatusOr<std::unique_ptr<psgd::MetricsWriter>> w =
        made.ok() ? psgd::MetricsWriter::Open(
                        absl::StrCat(*made, "/ps-", index_, ".jsonl"),
                        /*append=*/true)
                  : absl::StatusOr<std::unique_ptr<psgd::MetricsWriter>>(
                        made.status());
    if (!w.ok()) {
      spdlog::warn("no metrics: {}", w.status().ToString());
      failed_ = true;
      return false;
    }
    dir_ = *made;
    writer_ = *std::move(w);
    spdlog::info("writing metrics to {}", writer_->path());
    absl::StatusOr<std::unique_ptr<psgd::EventFileWriter>> events =
        psgd::EventFileWriter::Create(dir_, absl::StrCat("ps-", index_));
    if (events.ok()) {
      events_ = *std::move(events);
    } else {
      spdlog::warn("no TensorBoard events: {}", events.status().ToString());
    }
    return true;
  }

  psgd::ps::PsGrpcServer* const server_;  // Not owned.
  const std::string task_;
  const int index_;
  const absl::Time start_;
  absl::Time next_ = absl::InfinitePast();
  std::string dir_;
  std::unique_ptr<psgd::MetricsWriter> writer_;
  std::unique_ptr<psgd::EventFileWriter> events_;
  int64_t last_sent_ = 0;
  int64_t last_received_ = 0;
  bool failed_ = false;
};

// Logs what the shard restored at start.
void LogRestore(const psgd::ps::ServerOptions& options,
                const psgd::ps::ParameterShard::RestoreReport& r) {
  if (options.checkpoint.dir.empty()) return;
  for (const std::string& line : r.refused) spdlog::warn("{}", line);
  if (r.label < 0) {
    spdlog::info("no complete checkpoint in {}: starting empty",
                 options.checkpoint.dir);
    return;
  }
  spdlog::warn(
      "restored checkpoint step-{} (step {}, generation {}) from {}; refusing "
      "pushes and pulls until the workers roll the cluster back to it",
      r.label, r.step, r.generation, options.checkpoint.dir);
}

// Logs checkpoint failures and rollbacks as they happen.
class CheckpointLog {
 public:
  void Tick(const psgd::ps::ShardStatus& s) {
    if (s.checkpoint_failures > failures_) {
      spdlog::warn("checkpoint failed ({} so far): {}", s.checkpoint_failures,
                   s.last_checkpoint_error);
      failures_ = s.checkpoint_failures;
    }
    for (size_t i = rollbacks_; i < s.rollbacks.size(); ++i) {
      const psgd::ps::RollbackRecord& r = s.rollbacks[i];
      spdlog::warn(
          "rolled back from step {} to checkpoint step-{} (step {}); "
          "generation {}",
          r.from_step, r.label, r.to_step, r.generation);
    }
    rollbacks_ = std::max(rollbacks_, s.rollbacks.size());
  }

 private:
  int64_t failures_ = 0;
  size_t rollbacks_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  psgd::SetProgramUsage(
      "Serves one parameter-server shard over gRPC until a Shutdown RPC, "
      "SIGINT or SIGTERM.");
  absl::ParseCommandLine(argc, argv);
  if (const double slow = absl::GetFlag(FLAGS_slow_step_seconds);
      !(slow >= 0) || !std::isfinite(slow)) {
    std::fprintf(stderr,
                 "ps_server: --slow_step_seconds=%g must be >= 0 (0: never)\n",
                 slow);
    return 2;
  }
  if (psgd::PrintClusterRequested()) {
    absl::StatusOr<psgd::ResolvedCluster> cluster =
        psgd::ps::ResolvedClusterFromFlags();
    if (!cluster.ok()) {
      std::fprintf(stderr, "ps_server: %s\n",
                   std::string(cluster.status().message()).c_str());
      return 2;
    }
    std::fputs(psgd::PrintResolvedCluster(*cluster).c_str(), stdout);
    return 0;
  }
  absl::StatusOr<psgd::ps::ServerOptions> options =
      psgd::ps::ServerOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "ps_server: %s\n",
                 options.status().ToString().c_str());
    return 2;
  }
  if (absl::Status s =
          psgd::InitLoggingFromFlags(absl::StrCat("ps:", options->shard_index));
      !s.ok()) {
    std::fprintf(stderr, "ps_server: %s\n", s.ToString().c_str());
    return 2;
  }

  // Before any thread starts, so that gRPC's threads inherit the mask.
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = psgd::ps::PsGrpcServer::Start(*options);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  // Where it listens (the port the OS chose, for port 0) and, from a
  // config, the address the others dial.
  const std::string& listen = options->listen_address;
  const std::string dialled =
      options->ps_addresses.empty()
          ? ""
          : absl::StrCat(" (dialled as ",
                         options->ps_addresses[options->shard_index], ")");
  spdlog::info("shard {} of {} of cluster '{}' ({} mode) listening on {}:{}{}",
               options->shard_index, options->num_shards, options->cluster_name,
               std::string(psgd::ps::ModeName(options->mode)),
               listen.substr(0, listen.rfind(':')), (*server)->port(), dialled);
  spdlog::info("{} learning rate {} ({})",
               std::string(psgd::ps::OptimizerKindName(options->optimizer.kind)),
               options->optimizer.learning_rate,
               psgd::LrScheduleToString(options->optimizer.schedule));
  std::unique_ptr<psgd::MetricsHttpServer> prometheus;
  if (options->metrics_port > 0) {
    const std::string& listen = options->listen_address;
    std::string host = listen.substr(0, listen.rfind(':'));
    psgd::ps::PsGrpcServer* const served = server->get();
    absl::StatusOr<std::unique_ptr<psgd::MetricsHttpServer>> started =
        psgd::MetricsHttpServer::Start(host, options->metrics_port, [served] {
          return psgd::ps::ShardMetricsText(
              served->shard()->Status(),
              served->service()->payload_sent_bytes(),
              served->service()->payload_received_bytes());
        });
    if (!started.ok()) {
      spdlog::error("ps:{}: cannot serve its metrics: {}", options->shard_index,
                    started.status().ToString());
      return 1;
    }
    prometheus = *std::move(started);
    spdlog::info("Prometheus metrics on http://{}:{}/metrics", host,
                 prometheus->port());
  }
  LogRestore(*options, (*server)->shard()->restore_report());
  CheckpointLog checkpoint_log;
  // The rollbacks a restored shard knew of are not news.
  checkpoint_log.Tick((*server)->shard()->Status());
  if (const std::string dir = psgd::ps::RunDirFromFlags(); !dir.empty()) {
    (*server)->service()->SetRunDirIfUnset(dir);
  }
  ServerMetrics metrics(server->get(),
                        absl::StrCat("ps:", options->shard_index),
                        options->shard_index);

  std::string reason;
  // Refused calls are logged at most every 10 s (a scanner could send many).
  int64_t unauthenticated = 0;
  absl::Time next_auth_log = absl::InfinitePast();
  psgd::ps::SlowStepLog slow_steps(
      absl::Seconds(absl::GetFlag(FLAGS_slow_step_seconds)));
  while (reason.empty()) {
    metrics.Tick();
    const psgd::ps::ShardStatus now = (*server)->shard()->Status();
    checkpoint_log.Tick(now);
    if (const std::string slow = slow_steps.Check(now, absl::Now());
        !slow.empty()) {
      spdlog::warn("{}", slow);
    }
    if (const int64_t n = (*server)->service()->unauthenticated_calls();
        n > unauthenticated && absl::Now() >= next_auth_log) {
      spdlog::warn("refused {} call(s) without the cluster's token ({} so far)",
                   n - unauthenticated, n);
      unauthenticated = n;
      next_auth_log = absl::Now() + absl::Seconds(10);
    }
    for (int worker : (*server)->shard()->ExpireWorkers(absl::Now())) {
      spdlog::warn(
          "worker {} sent nothing for {} and left the live set (lease)",
          worker, absl::FormatDuration(options->worker_lease));
    }
    const timespec tick = {0, 100 * 1000 * 1000};
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal > 0) {
      reason = signal == SIGINT ? "SIGINT" : "SIGTERM";
    } else if ((*server)->WaitForShutdown(absl::Now())) {
      reason = "a Shutdown RPC";
    }
  }
  spdlog::info("stopping on {}", reason);
  (*server)->Stop(absl::Seconds(5));
  (*server)->shard()->FlushCheckpoints();
  metrics.Finish(reason);
  const psgd::ps::ShardStatus status = (*server)->shard()->Status();
  checkpoint_log.Tick(status);
  if (!options->checkpoint.dir.empty()) {
    spdlog::info("{} checkpoints written, the last step-{}",
                 status.checkpoints_written, status.last_checkpoint_label);
  }
  spdlog::info(
      "stopped at step {}: {} applied, {} aggregated, {} stale, {} "
      "surplus, {} refused; {} call(s) without the cluster's token",
      status.step, status.counters.applied, status.counters.aggregated,
      status.counters.dropped_stale, status.counters.dropped_surplus,
      status.counters.refused, (*server)->service()->unauthenticated_calls());
  return 0;
}
