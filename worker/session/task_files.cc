#include "worker/session/task_files.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_env.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/paths.h"
#include "worker/session/resync.h"

namespace psgd {

namespace {

// The run directory the chief sent with its Initialize, asking the servers
// (Status) until they have one. DEADLINE_EXCEEDED when none has by
// `deadline` (the chief has not started, or was given none).
absl::StatusOr<std::string> AwaitRunDir(ps::PsClient* client,
                                        absl::Time deadline,
                                        const WaitStop* stop) {
  for (;;) {
    if (stop != nullptr && stop->stopped()) {
      return StoppedWaiting("the run directory from the chief");
    }
    absl::StatusOr<std::vector<ps::ShardStatus>> status = client->Status();
    if (!status.ok() && !absl::IsUnavailable(status.status())) {
      return status.status();
    }
    if (status.ok()) {
      for (const ps::ShardStatus& s : *status) {
        if (!s.run_dir.empty()) return s.run_dir;
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          "the servers have no run directory yet: the chief (worker:0) has "
          "not initialised them; pass --run_dir to every task to write "
          "without it");
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

// Before AwaitServing, with a stop: until every server answers a call at
// all (not started yet: UNAVAILABLE), asking again with backoff (50 ms,
// doubling to 1 s) and looking at `stop` between, so that a signal ends
// the wait for servers that have not started. AwaitServing (which no stop
// ends) follows and finds them up.
absl::Status AwaitAnswer(ps::PsClient* client, absl::Time deadline,
                         const WaitStop* stop) {
  absl::Duration backoff = absl::Milliseconds(50);
  bool logged = false;
  for (;;) {
    if (stop->stopped()) return StoppedWaiting("waiting for parameter servers");
    const absl::Status s = client->Status().status();
    if (!IsTransient(s, /*deadline_too=*/true) || absl::Now() >= deadline) {
      return absl::OkStatus();  // AwaitServing says the rest
    }
    if (!logged) {
      spdlog::info("waiting for parameter servers: {}", s.ToString());
      logged = true;
    }
    if (!stop->SleepFor(backoff)) {
      return StoppedWaiting("waiting for parameter servers");
    }
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

}  // namespace

void ReportWorkerFailure(ps::PsClient* client,
                         const ps::RemoteClientOptions& options,
                         absl::string_view task_name,
                         const absl::Status& failure) {
  const std::string task(task_name);
  if (failure.ok() || absl::IsCancelled(failure) ||
      absl::IsUnavailable(failure)) {
    return;
  }
  std::unique_ptr<ps::RemotePsClient> own;
  if (client == nullptr) {
    ps::RemoteClientOptions o = options;
    o.rpc_timeout = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<ps::RemotePsClient>> made =
        ps::RemotePsClient::Create(o);
    if (!made.ok()) {
      spdlog::warn("could not tell the servers why {} stops: {}", task,
                   made.status().ToString());
      return;
    }
    own = *std::move(made);
    client = own.get();
  }
  absl::Status told = client->LeaveFailed(failure.message());
  if (!told.ok()) {
    spdlog::warn("could not tell the servers why {} stops: {}", task,
                 told.ToString());
  } else {
    spdlog::info("told the servers why {} stops", task);
  }
}

absl::StatusOr<std::string> OpenRunDir(
    const std::string& requested, const std::string& config_path,
    const ClusterConfig& config, bool chief, absl::Duration start_timeout,
    ps::RemoteClientOptions* client_options,
    std::unique_ptr<ps::RemotePsClient>* client, const WaitStop* stop) {
  std::string run_dir = ResolveUserPath(requested);
  if (run_dir.empty() && chief) {
    ASSIGN_OR_RETURN(run_dir,
                     CreateRunDir("", ResolveUserPath(config.run_root()),
                                  config.name(), absl::Now()));
  }
  client_options->run_dir = run_dir;
  ASSIGN_OR_RETURN(*client, ps::RemotePsClient::Create(*client_options));
  const absl::Time deadline = absl::Now() + start_timeout;
  if (stop != nullptr) {
    RETURN_IF_ERROR(AwaitAnswer(client->get(), deadline, stop));
  }
  RETURN_IF_ERROR((*client)->AwaitServing(deadline));
  if (run_dir.empty()) {
    ASSIGN_OR_RETURN(
        run_dir, AwaitRunDir(client->get(), absl::Now() + start_timeout, stop));
  }
  ASSIGN_OR_RETURN(run_dir, CreateRunDir(run_dir, "", "", absl::Now()));
  if (chief) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path));
    RETURN_IF_ERROR(WriteFileAtomically(run_dir + "/config.pbtxt", text));
    // The cluster as resolved here (an engine's addresses in place of the
    // file's): a worker started later, an elastic one in a second srun
    // step, runs with --config=RUN_DIR/cluster.pbtxt --task=worker:J.
    RETURN_IF_ERROR(WriteFileAtomically(
        run_dir + "/cluster.pbtxt",
        absl::StrCat("# The cluster as the chief resolved it. A worker "
                     "started later: worker --config=THIS_FILE "
                     "--task=worker:J\n",
                     ClusterConfigText(config))));
    if (config.security().has_token() && !config.security().has_token_file()) {
      spdlog::warn(
          "the config holds the cluster's token inline, so {}/config.pbtxt "
          "holds it too; security.token_file keeps it out of run directories",
          run_dir);
    }
  }
  spdlog::info("run directory {}", run_dir);
  return run_dir;
}

std::string RunSummaryPath(const std::string& run_dir) {
  return run_dir + "/summary.json";
}

JsonObject WorkerSummary(const std::string& task,
                         const ClusterWorkerResult& r) {
  JsonObject s;
  s.Set("task", task)
      .Set("local_steps", r.local_steps)
      .Set("final_global_step", r.final_global_step)
      .Set("seconds", r.seconds)
      .Set("images_per_s", r.images_per_s)
      .Set("end_reason", r.end_reason)
      .Set("recoveries", r.recoveries);
  for (const auto& [outcome, count] : r.outcomes) {
    s.Set(absl::StrCat("pushes_", StepOutcomeName(outcome)), count);
  }
  if (!r.evals.empty()) {
    s.Set("final_test_accuracy", r.evals.back().test_accuracy);
  }
  return s;
}

JsonObject RunSummary(const ClusterConfig& config,
                      const ClusterWorkerResult& r) {
  const config::TrainingConfig& t = config.training();
  JsonObject s;
  s.Set("cluster", config.name())
      .Set("mode", t.mode() == config::TrainingConfig::SYNC ? "sync" : "async")
      .Set("ps_tasks", config.ps_size())
      .Set("workers", config.worker_size())
      .Set("replicas_to_aggregate", t.replicas_to_aggregate())
      .Set("total_num_replicas", t.total_num_replicas())
      .Set("batch_size", t.batch_size())
      .Set("model", config.model().name())
      .Set("final_global_step", r.final_global_step)
      .Set("seconds", r.seconds)
      .Set("end_reason", r.end_reason);
  if (!r.evals.empty()) {
    s.Set("final_test_accuracy", r.evals.back().test_accuracy);
  }
  // The push counters and the expired leases are shard 0's: it decides
  // every push for every shard (docs/PS.md, "One decision per push").
  ps::PushCounters total;
  int64_t expired = 0;
  if (!r.server_status.empty()) {
    total = r.server_status[0].counters;
    expired = r.server_status[0].workers_expired;
  }
  s.Set("server_workers_expired", expired);
  // Parameter-server restarts survived and what they cost
  // (docs/RELIABILITY.md).
  const RollbackSummary rollbacks = SummarizeRollbacks(r.server_status);
  s.Set("ps_rollbacks", rollbacks.rollbacks)
      .Set("steps_redone", rollbacks.steps_redone)
      .Set("max_steps_redone", rollbacks.max_steps_redone);
  s.Set("server_aggregated", total.aggregated)
      .Set("server_applied", total.applied)
      .Set("server_dropped_stale", total.dropped_stale)
      .Set("server_dropped_surplus", total.dropped_surplus)
      .Set("server_refused", total.refused)
      .Set("server_refused_too_stale", total.refused_too_stale)
      .Set("server_completed_by_leave", total.completed_by_leave);
  if (!r.server_status.empty()) {
    std::string hist;
    for (const auto& [staleness, count] :
         r.server_status[0].staleness_histogram) {
      absl::StrAppend(&hist, hist.empty() ? "" : ",", staleness, ":", count);
    }
    s.Set("staleness_histogram_shard0", hist);
  }
  return s;
}

}  // namespace psgd
