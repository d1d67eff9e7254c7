// The run of one worker task, written once for every front end that drives
// a WorkerSession: the C++ worker (worker/cluster/cluster_worker.h: a model
// and a batcher) and the Python binding (worker/session/external_worker.h: the
// caller computes the gradients). The front end computes and pushes; the run
// owns the session and the chief's duties and decides the rest:
//
//   Start      the session (and, for the chief, the Chief), the chief's
//              Initialize, the Join; a job that cannot start because workers
//              failed ends here (Chief::EndJob);
//   BeforeStep pulls in flight settled when the run stops or the chief
//              evaluates next; why the run stops (max_steps, the time
//              budget: StopReason); the chief's check of failed workers and
//              its checkpoint requests; whether it evaluates now;
//   Inject...  straggler emulation's delays (worker/session/stragglers.h),
//              waited out where the front end's step has them: after its
//              compute, before its push, after its pull;
//   RecordStep the step's record (numbered, timed against the run's start,
//              counted by outcome, its injected delay apart), reported
//              (on_step) and in the progress line; RecordEval the same for
//              an evaluation;
//   Leave      the live set left first (a sync step never waits for a
//              worker that stopped); the chief waits for the others and
//              pulls the final weights for its final evaluation;
//   Finish     the end's log line, the chief's final checkpoint and
//              Shutdown, the run's result.
//
// train_local (worker/train/local_trainer.h) has no servers, and so no run
// of this kind.
//
// Thread-safety: thread-compatible: one thread drives a run.
#ifndef PSGD_WORKER_SESSION_TASK_RUN_H_
#define PSGD_WORKER_SESSION_TASK_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ps/client/ps_client.h"
#include "worker/session/chief.h"
#include "worker/session/progress.h"
#include "worker/session/records.h"
#include "worker/session/stragglers.h"
#include "worker/session/worker_session.h"

namespace psgd {

// Where a run's records go (a run directory's files, through MetricSinks;
// a test's vector). Either may be empty.
struct RunCallbacks {
  std::function<absl::Status(const StepRecord&)> on_step;
  std::function<absl::Status(const EvalRecord&)> on_eval;
};

struct TaskRunOptions {
  // How log lines name the worker: "worker:1".
  std::string name;
  // When the run stops (max_steps, max_seconds) and how far along it is
  // (total_batches) in the progress line.
  RunEnds ends;
  // A progress line every this many local steps (0: never).
  int64_t log_every = 50;
  // Set for the chief (worker 0), whose duties they are.
  bool chief = false;
  ChiefOptions chief_options;
  // Straggler emulation (ClusterConfig.stragglers): what this worker's
  // steps have injected (InjectAfterCompute, InjectTransfer).
  StragglerEmulator stragglers;
  // The worker computes nothing (ClusterConfig.emulation): every step
  // record says so.
  bool emulated = false;
};

// What stops a worker when the servers have shut down: the chief finished.
extern const char kServersShutDown[];

class TaskRun {
 public:
  TaskRun(TaskRunOptions options, RunCallbacks callbacks);

  // The run's clock starts; the run takes `session`; the chief initialises
  // the servers with `initial` (every variable the session was made with,
  // by name); then the session joins (WorkerSession::Start). The chief ends
  // the job when workers failed to take part (FAILED_PRECONDITION, after
  // Chief::EndJob). Errors: the session's.
  absl::Status Start(std::unique_ptr<WorkerSession> session,
                     absl::Span<const ps::NamedConstTensorView> initial);

  // Null before Start.
  WorkerSession* session() const { return session_.get(); }
  // Null unless the chief.
  Chief* chief() const { return chief_.get(); }
  absl::Time start() const { return start_; }

  // Why the run stops before computing from the weights at `version`
  // ("reached step N", "the time budget of 1m is spent"), or "" to go on.
  std::string StopReason(const ps::ModelVersion& version) const;

  // Before a step. `stop` is why the run stops (StopReason at the weights
  // the next step would use; kServersShutDown when the servers have shut
  // down), "" to go on; `evaluate`: the chief evaluates the current weights
  // now (then Evaluated). Pulls in flight (overlap) are settled first when
  // the run stops or the chief evaluates: both need the weights themselves.
  // Errors: the session's; the chief's FAILED_PRECONDITION that ends the job
  // (ChiefDuties).
  struct Next {
    std::string stop;
    bool evaluate = false;
  };
  absl::StatusOr<Next> BeforeStep();
  // The chief's duties between steps, alone (BeforeStep does them): the
  // failed workers (Chief::CheckWorkers: FAILED_PRECONDITION ends the job)
  // and the checkpoint requests. OK for other workers.
  absl::Status ChiefDuties();
  // The chief evaluates at the current weights; Evaluated(step) after.
  bool EvalDue() const;
  void Evaluated(int64_t global_step);

  // Straggler emulation, waited out here and recorded in the next
  // RecordStep's injected_s: after a step's compute, which took `compute`
  // ((slow_factor - 1) x compute, a stall, an extra delay), and around the
  // transfers (before a push, after a pull). Nothing without stragglers.
  void InjectAfterCompute(absl::Duration compute);
  void InjectTransfer();

  // A finished step: `record` holds what the front end knows (global step,
  // epoch, batch size, loss, accuracy, the push's outcome and staleness);
  // the run numbers it (local_step), fills its times from `timings`, counts
  // it, reports it (on_step) and adds it to the progress line after
  // `batches_done` of this worker's batches.
  absl::Status RecordStep(StepRecord* record, const StepTimings& timings,
                          int64_t batches_done);
  // An evaluation: stamped with the run's wall time, logged, kept in the
  // result, reported (on_eval).
  absl::Status RecordEval(EvalRecord record);

  // After the last step: leaves the live set (pulls in flight end first);
  // the chief then waits for the others to leave and pulls the newest
  // weights, which its final evaluation uses. OK when the servers have shut
  // down already (servers_gone()), and at once, with no call, when the
  // chief ended the job (Chief::EndJob: they are shut down).
  // `wait_for_others` false: the chief does not wait for the others to
  // leave (the job ends now: Finish shuts the servers down).
  absl::Status Leave(bool wait_for_others = true);
  bool servers_gone() const { return servers_gone_; }
  bool left() const { return left_; }
  // After Leave (and the chief's final evaluation): logs why the run ended;
  // the chief's final checkpoint and Shutdown; the result's totals.
  absl::Status Finish(std::string end_reason);

  const ClusterWorkerResult& result() const { return result_; }

 private:
  const TaskRunOptions options_;
  const RunCallbacks callbacks_;
  StragglerEmulator stragglers_;
  absl::Duration injected_ = absl::ZeroDuration();  // since the last record
  ProgressLog progress_;
  std::unique_ptr<WorkerSession> session_;
  std::unique_ptr<Chief> chief_;  // the chief only
  absl::Time start_ = absl::Now();
  ps::ModelVersion latest_;  // the chief's final weights (Leave)
  bool left_ = false;
  bool servers_gone_ = false;
  double step_seconds_ = 0.0;  // time in steps
  int64_t images_ = 0;
  ClusterWorkerResult result_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_TASK_RUN_H_
