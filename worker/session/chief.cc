#include "worker/session/chief.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace psgd {

Chief::Chief(WorkerSession* session, ChiefOptions options)
    : session_(session),
      options_(std::move(options)),
      next_eval_(options_.eval_every) {
  if (options_.checkpoint_every > absl::ZeroDuration()) {
    next_checkpoint_ = absl::Now() + options_.checkpoint_every;
  }
}

bool Chief::EvalDue(const ps::ModelVersion& version) const {
  return options_.eval_every > 0 && GlobalStep(version) >= next_eval_;
}

void Chief::Evaluated(int64_t global_step) {
  if (options_.eval_every <= 0) return;
  next_eval_ = (global_step / options_.eval_every + 1) * options_.eval_every;
}

void Chief::MaybeRequestCheckpoint(const ps::ModelVersion& version) {
  if (absl::Now() < next_checkpoint_) return;
  next_checkpoint_ = absl::Now() + options_.checkpoint_every;
  // Every shard saves at its first step >= label: the same step in sync
  // mode, where the shards move in lockstep.
  const int64_t label = NewestStep(version) + 1;
  absl::Status s = session_->client()->RequestCheckpoint(label, /*now=*/false);
  if (!s.ok()) {
    spdlog::warn("asking for checkpoint step-{}: {}", label, s.ToString());
  }
}

absl::Status Chief::CheckWorkers() {
  const absl::Time now = absl::Now();
  if (now < next_worker_check_) return absl::OkStatus();
  next_worker_check_ = now + absl::Seconds(1);
  absl::StatusOr<std::vector<ps::ShardStatus>> status = session_->Status();
  if (!status.ok()) return absl::OkStatus();  // the step's own calls tell
  absl::Status failed =
      CheckWorkerFailures(*status, session_->options().allowed_failures);
  if (failed.ok()) return failed;
  return EndJob(failed);
}

absl::Status Chief::EndJob(const absl::Status& why) {
  ended_job_ = true;
  spdlog::error("ending the job: {}", why.ToString());
  absl::Status down = session_->client()->Shutdown(
      absl::StrCat("the job failed: ", why.message()));
  if (!down.ok()) {
    spdlog::warn("shutting the servers down: {}", down.ToString());
  }
  return why;
}

absl::Status Chief::AwaitOthersLeft() {
  const absl::Time deadline = absl::Now() + options_.finish_timeout;
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<ps::ShardStatus> status, session_->Status());
    std::vector<int> live;
    for (const ps::ShardStatus& s : status) {
      live.insert(live.end(), s.live_workers.begin(), s.live_workers.end());
    }
    if (live.empty()) return absl::OkStatus();
    if (session_->recovery().stopped()) {
      // A signal: the job ends now, as when the chief does not wait.
      spdlog::warn("stopped waiting for workers {} to leave: the job ends now",
                   absl::StrJoin(live, ","));
      return absl::OkStatus();
    }
    if (absl::Now() >= deadline) {
      std::sort(live.begin(), live.end());
      live.erase(std::unique(live.begin(), live.end()), live.end());
      spdlog::warn(
          "workers {} have not left {} after the chief finished; shutting "
          "the servers down anyway",
          absl::StrJoin(live, ","),
          absl::FormatDuration(options_.finish_timeout));
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::StatusOr<std::vector<ps::ShardStatus>> Chief::ShutDownServers(
    const ps::ModelVersion& latest) {
  ps::PsClient* client = session_->client();
  Recovery& recovery = session_->recovery();
  if (options_.final_checkpoint) {
    // One label for every shard, also when their steps differ (async).
    const int64_t label = NewestStep(latest);
    absl::Status saved = recovery.Retrying(
        [&]() { return client->RequestCheckpoint(label, /*now=*/true); });
    if (!saved.ok()) {
      spdlog::warn("the final checkpoint step-{} failed: {}", label,
                   saved.ToString());
    }
  }
  ASSIGN_OR_RETURN(std::vector<ps::ShardStatus> status, session_->Status());
  RETURN_IF_ERROR(recovery.Retrying([&]() {
    return client->Shutdown(
        absl::StrCat("training finished at step ", GlobalStep(latest)));
  }));
  return status;
}

}  // namespace psgd
