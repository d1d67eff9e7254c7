// How a worker gets back in step with the parameter servers after a
// transient failure (docs/RELIABILITY.md): a server unreachable (killed,
// restarting, cut off) or the cluster rolling back to a checkpoint.
//
// Recover asks every shard for its status, retrying with backoff (50 ms
// doubling to 2 s) for up to `unavailable_timeout`; when a restarted shard
// restored a checkpoint it rolls the whole cluster back to it (Rollback, the
// same request from every worker; worker/session/resync.h decides); then it
// joins again (a no-op when live). Retrying wraps a call in that. While no
// server answers, a job that ended is told from a crash by the chief's run
// summary (`job_end_marker`, the run directory's summary.json, written
// after the servers shut down): once it appears, newer than this worker's
// start, the worker ends (CANCELLED) instead of waiting for servers that
// will not come back. A worker that is ending (a signal, python/module.cc)
// stops waiting: given a WaitStop (set_wait_stop), Recover returns CANCELLED
// at once once it is stopped, instead of retrying for minutes.
//
// Also the version arithmetic every worker loop needs (GlobalStep,
// NewestStep, AnyStepOf).
//
// Thread-safety: thread-compatible; one per worker, used by its loop.
#ifndef PSGD_WORKER_SESSION_RECOVERY_H_
#define PSGD_WORKER_SESSION_RECOVERY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "ps/client/ps_client.h"

namespace psgd {

// The end of a worker's waits for the servers, set once from any thread (a
// signal's watcher while the worker's thread waits): a Recovery given it
// stops retrying, and so do the waits of a worker's start (OpenRunDir,
// ServerVariables). A call under way is not cut short (one to a server that
// is down fails at once); no wait starts again. Thread-safe.
class WaitStop {
 public:
  void Stop() { stopped_.Notify(); }
  bool stopped() const { return stopped_.HasBeenNotified(); }
  // Sleeps `d`, less when stopped meanwhile: false when stopped.
  bool SleepFor(absl::Duration d) const {
    return !stopped_.WaitForNotificationWithDeadline(absl::Now() + d);
  }

 private:
  mutable Notification stopped_;
};

// What a wait that `stop` ended returns: CANCELLED, with `what` the wait
// gave up on.
absl::Status StoppedWaiting(absl::string_view what);

// The lowest and the highest of the shards' steps (0 for none).
int64_t GlobalStep(const ps::ModelVersion& version);
int64_t NewestStep(const ps::ModelVersion& version);
// Any step of every shard, in `generation` (0: any).
ps::ModelVersion AnyStepOf(int num_shards, int64_t generation);

// A failure the worker waits out: UNAVAILABLE or ABORTED, and with
// `deadline_too` DEADLINE_EXCEEDED (for calls that do not wait for a step).
bool IsTransient(const absl::Status& status, bool deadline_too);

class Recovery {
 public:
  // `client` is not owned and must outlive this. `worker_id` names the
  // worker in log lines. `job_end_marker`: see above (empty: none).
  Recovery(ps::PsClient* client, int worker_id,
           absl::Duration unavailable_timeout, std::string job_end_marker = "");
  Recovery(const Recovery&) = delete;
  Recovery& operator=(const Recovery&) = delete;

  // After `cause`: waits until every shard answers and they agree on one
  // generation, rolling the cluster back when a restarted shard restored a
  // checkpoint, and joins again. Returns the generation. CANCELLED when the
  // servers shut down (they say so, or the job's end marker appeared while
  // none answered); the last failure (annotated) when
  // unavailable_timeout passes; any non-transient error at once (e.g. the
  // Rollback's when a checkpoint cannot be loaded).
  absl::StatusOr<int64_t> Recover(const absl::Status& cause);

  // call() until it succeeds or fails with anything but a transient error,
  // recovering in between.
  absl::Status Retrying(const std::function<absl::Status()>& call);

  // Times Recover ran.
  int64_t recoveries() const { return recoveries_; }

  // Recover gives up (CANCELLED) once `stop` is set; not owned, outlives
  // this (null: never).
  void set_wait_stop(const WaitStop* stop) { stop_ = stop; }
  // The wait stop is set: the worker is ending (the chief stops waiting for
  // the others to leave, Chief::AwaitOthersLeft).
  bool stopped() const { return stop_ != nullptr && stop_->stopped(); }

 private:
  ps::PsClient* const client_;  // Not owned.
  const int worker_id_;
  const absl::Duration unavailable_timeout_;
  const std::string job_end_marker_;
  const absl::Time started_;  // markers older than this are another run's
  int64_t recoveries_ = 0;
  const WaitStop* stop_ = nullptr;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_RECOVERY_H_
