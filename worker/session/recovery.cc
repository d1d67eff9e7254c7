#include "worker/session/recovery.h"

#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/session/resync.h"

namespace psgd {

int64_t GlobalStep(const ps::ModelVersion& version) {
  if (version.steps.empty()) return 0;
  return *std::min_element(version.steps.begin(), version.steps.end());
}

int64_t NewestStep(const ps::ModelVersion& version) {
  if (version.steps.empty()) return 0;
  return *std::max_element(version.steps.begin(), version.steps.end());
}

ps::ModelVersion AnyStepOf(int num_shards, int64_t generation) {
  ps::ModelVersion v = ps::ModelVersion::AtLeast(num_shards, 0);
  v.generation = generation;
  return v;
}

bool IsTransient(const absl::Status& s, bool deadline_too) {
  return absl::IsUnavailable(s) || absl::IsAborted(s) ||
         (deadline_too && absl::IsDeadlineExceeded(s));
}

namespace {

// Whether `path` names a file modified at or after `since`.
bool WrittenSince(const std::string& path, absl::Time since) {
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0) return false;
  return absl::TimeFromTimespec(st.st_mtim) >= since;
}

}  // namespace

absl::Status StoppedWaiting(absl::string_view what) {
  return absl::CancelledError(absl::StrCat(
      "stopped waiting for the servers (the worker is ending): ", what));
}

Recovery::Recovery(ps::PsClient* client, int worker_id,
                   absl::Duration unavailable_timeout,
                   std::string job_end_marker)
    : client_(client),
      worker_id_(worker_id),
      unavailable_timeout_(unavailable_timeout),
      job_end_marker_(std::move(job_end_marker)),
      // A second back: file systems keep modification times coarsely.
      started_(absl::Now() - absl::Seconds(1)) {}

absl::StatusOr<int64_t> Recovery::Recover(const absl::Status& cause) {
  if (stop_ != nullptr && stop_->stopped()) {
    return StoppedWaiting(cause.ToString());
  }
  ++recoveries_;
  spdlog::warn("worker {}: {}; re-syncing with the servers", worker_id_,
               cause.ToString());
  const absl::Time deadline = absl::Now() + unavailable_timeout_;
  absl::Duration backoff = absl::Milliseconds(50);
  absl::Status last = cause;
  for (;;) {
    absl::StatusOr<std::vector<ps::ShardStatus>> status = client_->Status();
    if (!status.ok()) {
      last = status.status();
      if (IsTransient(last, /*deadline_too=*/true) &&
          WrittenSince(job_end_marker_, started_)) {
        return absl::CancelledError(
            absl::StrCat("the job ended: the chief wrote ", job_end_marker_,
                         " and the servers are gone (", last.message(), ")"));
      }
    } else {
      const ResyncDecision d = DecideResync(*status);
      switch (d.kind) {
        case ResyncDecision::Kind::kShutDown:
          return absl::CancelledError(d.why);
        case ResyncDecision::Kind::kInSync:
          // The servers may have lost this worker (a restarted shard, an
          // expired lease): join again (a no-op when live).
          last = client_->Join();
          if (last.ok()) {
            spdlog::info(
                "worker {}: in step with the servers again "
                "(generation {})",
                worker_id_, d.generation);
            return d.generation;
          }
          break;
        case ResyncDecision::Kind::kRollback:
          spdlog::warn(
              "worker {}: {}: rolling the cluster back to "
              "checkpoint step-{} (generation {})",
              worker_id_, d.why, d.label, d.generation);
          last = client_->Rollback(d.label, d.generation);
          if (last.ok()) continue;  // and look again at once
          break;
        case ResyncDecision::Kind::kWait:
          last = absl::UnavailableError(d.why);
          break;
      }
    }
    if (!IsTransient(last, /*deadline_too=*/true)) return last;
    if (absl::Now() + backoff > deadline) {
      return Annotate(
          last, absl::StrCat("the parameter servers did not come back within ",
                             absl::FormatDuration(unavailable_timeout_),
                             " (ps_unavailable_timeout): "));
    }
    if (stop_ == nullptr) {
      absl::SleepFor(backoff);
    } else if (!stop_->SleepFor(backoff)) {
      return StoppedWaiting(last.ToString());
    }
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

absl::Status Recovery::Retrying(const std::function<absl::Status()>& call) {
  for (;;) {
    absl::Status s = call();
    if (s.ok() || !IsTransient(s, /*deadline_too=*/true)) return s;
    RETURN_IF_ERROR(Recover(s).status());
  }
}

}  // namespace psgd
