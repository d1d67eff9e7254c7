// The chief's duties (worker 0), beside its own steps: asking the servers
// for a checkpoint every checkpoint_every, telling when an evaluation is
// due, and the end of training: waiting for the other workers to leave,
// then (after the caller's final evaluation) a final checkpoint, the
// servers' statuses for the run's summary, and Shutdown. No model in it:
// the caller evaluates.
//
// Thread-safety: thread-compatible; used by the chief's worker loop.
#ifndef PSGD_WORKER_SESSION_CHIEF_H_
#define PSGD_WORKER_SESSION_CHIEF_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/client/ps_client.h"
#include "worker/session/worker_session.h"

namespace psgd {

struct ChiefOptions {
  // Evaluate every this many global steps (0: only at the end).
  int64_t eval_every = 0;
  // Ask every shard for a checkpoint this often, at a step just ahead of
  // the newest (zero: never); and a final one before shutting the servers
  // down (when they have a checkpoint directory).
  absl::Duration checkpoint_every = absl::ZeroDuration();
  bool final_checkpoint = false;
  // How long to wait for the other workers to leave before shutting the
  // servers down anyway.
  absl::Duration finish_timeout = absl::Minutes(5);
};

class Chief {
 public:
  // `session` is not owned and must outlive this. The checkpoint clock
  // starts now.
  Chief(WorkerSession* session, ChiefOptions options);

  // An evaluation is due at `version`; Evaluated(step) schedules the next.
  bool EvalDue(const ps::ModelVersion& version) const;
  void Evaluated(int64_t global_step);
  // Every checkpoint_every: asks each shard for checkpoint step-<label> at
  // its first step >= label (the same step in sync mode). A failure is
  // logged, not returned: training goes on.
  void MaybeRequestCheckpoint(const ps::ModelVersion& version);

  // At most once a second: the servers' failed workers (workers that left
  // because they cannot take part). More of them than the session allows
  // (training.min_workers) ends the job: the servers are shut down with
  // the reason, so that every worker stops, and FAILED_PRECONDITION naming
  // each failed worker and its reason is returned.
  absl::Status CheckWorkers();
  // Ends the job because of `why` (an error): logs it and shuts the servers
  // down with it as the reason, so that every worker stops. Returns `why`.
  absl::Status EndJob(const absl::Status& why);
  // EndJob has run: the servers are shut down (or going), and nothing is
  // asked of them any more (TaskRun::Leave makes no call).
  bool ended_job() const { return ended_job_; }

  // The end, part one: waits (up to finish_timeout) until the other
  // workers have left, so that none finds the servers gone and the final
  // evaluation sees their last updates; at once when the session's
  // recovery is stopped (a signal: Recovery::stopped). Errors: the
  // session's.
  absl::Status AwaitOthersLeft();
  // The end, part two, after the final evaluation at `latest`: the final
  // checkpoint (a failure is logged), the servers' statuses (returned),
  // Shutdown. Errors: the session's.
  absl::StatusOr<std::vector<ps::ShardStatus>> ShutDownServers(
      const ps::ModelVersion& latest);

 private:
  WorkerSession* const session_;  // Not owned.
  const ChiefOptions options_;
  int64_t next_eval_;
  absl::Time next_checkpoint_ = absl::InfiniteFuture();
  absl::Time next_worker_check_ = absl::InfinitePast();
  bool ended_job_ = false;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_CHIEF_H_
