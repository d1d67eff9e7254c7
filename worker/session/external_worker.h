// A worker task whose model lives outside C++ (the Python package psgd,
// python/psgd/): the config and task resolved as the daemons resolve
// them, the servers awaited, the run directory and outputs of the C++
// worker (worker-J.jsonl, the chief's TensorBoard events and summary.json;
// worker/session/task_files.h, task_outputs.h), and the run of every worker
// front end (worker/session/task_run.h: the session over the caller's
// weight buffers, stop reasons, the chief's duties, the records, leave and
// finish). What it adds: the checks of the caller's variables and
// gradients, and the calls one at a time that a Python loop makes. The
// caller's loop computes the gradients; python/module.cc is the thin
// binding over this class.
//
//   auto w = *ExternalWorker::Create(options);      // no network yet
//   w->Join(variables);        // chief: initialise; all: first weights
//   for (;;) {
//     ... gradients from the buffers, computed at w->step() ...
//     PushOutcome o = *w->Push(step, gradients);
//     w->Pull();                                    // the next weights
//     w->RecordStep(...);
//   }
//   w->Leave();                // chief: waits for the others, newest weights
//   w->Finish(reason);         // chief: shuts the servers down; summaries
//
// Errors: INVALID_ARGUMENT for a bad config, task or input (naming it;
// nothing is sent), FAILED_PRECONDITION for variables that are not the
// cluster's (payload kModelMismatchPayload, worker/session/model_check.h), and
// the session's (DEADLINE_EXCEEDED, UNAVAILABLE, UNAUTHENTICATED for a wrong
// token, CANCELLED once the servers shut down).
//
// Thread-safety: thread-compatible: one thread calls it (AddPart may come
// from backward hooks on the autograd thread, one at a time, while the
// calling thread waits in the backward; InterruptPulls, ResumePulls,
// Interrupt and StopWaiting from any thread).
#ifndef PSGD_WORKER_SESSION_EXTERNAL_WORKER_H_
#define PSGD_WORKER_SESSION_EXTERNAL_WORKER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/cluster_config.h"
#include "common/mutex.h"
#include "ps/client/remote_client.h"
#include "worker/session/lease_keeper.h"
#include "worker/session/records.h"
#include "worker/session/recovery.h"
#include "worker/session/sample_records.h"
#include "worker/session/session_config.h"
#include "worker/session/step_overlap.h"
#include "worker/session/task_outputs.h"
#include "worker/session/task_run.h"
#include "worker/session/worker_session.h"

namespace psgd {

struct ExternalWorkerOptions {
  std::string config_path;
  // "worker:J"; may be empty when cluster_from names the engine.
  std::string task;
  // "" (the config's addresses), "slurm" or "tf_config" (common/cluster_env.h).
  std::string cluster_from;
  int slurm_port_base = 8888;
  // The run directory; empty: the chief's RUN_ROOT/NAME-TIMESTAMP.
  std::string run_dir;
  // A progress line every this many local steps (0: never).
  int64_t log_every = 50;
};

class ExternalWorker {
 public:
  // Loads the config and resolves the task; no network. INVALID_ARGUMENT
  // (the config's file, line and field; a task the config lacks; a ps
  // task), NOT_FOUND for a config that cannot be read.
  static absl::StatusOr<std::unique_ptr<ExternalWorker>> Create(
      const ExternalWorkerOptions& options);
  // Leaves the live set when joined and not left (errors ignored).
  ~ExternalWorker();
  ExternalWorker(const ExternalWorker&) = delete;
  ExternalWorker& operator=(const ExternalWorker&) = delete;

  const ClusterConfig& config() const { return config_; }
  const TaskId& task() const { return task_; }
  const SessionTaskConfig& settings() const { return settings_; }
  const std::string& run_dir() const { return run_dir_; }

  // `variables`: the model's, in forward order, each with the buffer that
  // pulls write into (not owned; must outlive this). Checks them against
  // the cluster's (see worker/session/model_check.h), waits for the servers,
  // opens the run directory; the chief initialises the servers from the
  // buffers; then joins and pulls the first weights. INVALID_ARGUMENT for bad
  // variables; FAILED_PRECONDITION for a second Join. `total_batches`: the
  // worker's batches in all (epochs x batches per epoch; 0: unknown), for
  // the progress lines' ETA. `statistics`: the names among `variables` that
  // are batch norm's running statistics (VariableKind::kRunningStatistic;
  // INVALID_ARGUMENT naming one that is not a variable); the others are
  // trained parameters.
  absl::Status Join(std::vector<ps::NamedTensorView> variables,
                    int64_t total_batches,
                    const std::vector<std::string>& statistics = {});

  // The weights' global step (the lowest shard step) and generation; after
  // Leave, the last step (the chief's: of the newest weights).
  int64_t step() const;
  int64_t generation() const;
  // The servers' learning rate for the next update from the weights at
  // step() (training.optimizer's learning_rate times its schedule's factor
  // at update step() + 1, common/lr_schedule.h; async pushes may scale it
  // by their staleness on top).
  double learning_rate() const;
  // Why the worker stops before its next step (max_steps reached at the
  // step of the next weights, the time budget spent), or empty.
  std::string StopReason() const;

  // The step's gradients, whole, computed from the weights at `step`
  // (INVALID_ARGUMENT when that is not step(): nothing sent; every
  // variable once, with its shape).
  absl::StatusOr<PushOutcome> Push(
      int64_t step, absl::Span<const ps::NamedConstTensorView> gradients);
  // The weights for the next step, into the buffers: after a push the
  // session's pull (sync: waits for the step; with overlap the groups'
  // pulls start and the step awaits them); before any push the newest.
  absl::Status Pull();
  bool pulls_in_flight() const;
  absl::Status SettlePulls();
  // From another thread while this one waits (a Ctrl-C): the pulls under
  // way end with CANCELLED, and so do those that start until ResumePulls
  // (WorkerSession::InterruptPulls; also while Join waits for the chief's
  // initialisation).
  void InterruptPulls();
  void ResumePulls();
  // From another thread, also before or during Join (a signal: the worker
  // is ending): InterruptPulls, and every wait for the servers ends now
  // and from now on with CANCELLED: Join's waits for servers that have not
  // started and for the chief's initialisation, and the retries of a call
  // while no server answers (Recovery, the minutes of
  // ps_unavailable_timeout). A later call is still made, once: Leave and
  // Finish after it end the run as when the servers are gone (OK; the
  // summaries written) when no server answers.
  void Interrupt();
  // The waits alone (no pull interrupted), for good: the destructor's
  // Leave, or a caller that ends without waiting for servers that are gone.
  void StopWaiting() { wait_stop_.Stop(); }

  // Overlap (wire { overlap: true }; FAILED_PRECONDITION without it): a
  // step in worker/session/step_overlap.h's order, the caller's hooks
  // saying when its forward reaches parameter v and when its backward has a
  // gradient. BeginStep before the forward; AwaitWeights(v) before
  // parameter v's first use (INVALID_ARGUMENT out of range); ForwardDone
  // after it. Each says whether the step goes on (kCompute), stops before
  // its push (kStop) or is to be computed again (kRedo: the whole model was
  // pulled again).
  absl::StatusOr<StepOverlap::State> BeginStep();
  absl::StatusOr<StepOverlap::State> AwaitWeights(int v);
  absl::StatusOr<StepOverlap::State> ForwardDone();
  // One parameter's gradient as soon as it is ready; it must stay
  // unchanged until FinishParts. INVALID_ARGUMENT for an unknown variable,
  // another shape or a running statistic (nothing sent).
  absl::Status AddPart(ps::NamedConstTensorView gradient);
  // Every variable's gradient (the statistics' batch values), as Push's:
  // those not yet sent go as parts, then the push is finished.
  absl::StatusOr<PushOutcome> FinishParts(
      int64_t step, absl::Span<const ps::NamedConstTensorView> gradients);

  // The servers hand out the data (data { sharding: SERVERS }): the next
  // chunk of sample indices (WorkerSession::LeaseData, which waits while the
  // last epoch's chunks are out with other workers, asking `keep_waiting`
  // before each pause; OUT_OF_RANGE once the data ended), and the chunk the
  // next push carries when the caller leased ahead (UseChunk).
  absl::StatusOr<ps::DataChunk> LeaseData(
      const std::function<bool()>& keep_waiting = nullptr);
  absl::Status UseChunk(const ps::DataChunkRef& chunk);
  // data { record_samples: true }: the ids of the samples the next push's
  // batch fed the model (a dataset item's own index); without it the record
  // names the samples of the chunk leased (worker/session/sample_records.h:
  // each push writes a line to samples-worker-J.jsonl). Ignored without
  // the setting.
  void SetSamples(std::vector<int64_t> samples);

  // Before a step, as the C++ worker's (TaskRun::BeforeStep): pulls in
  // flight settled when the worker stops or the chief evaluates next; why
  // the worker stops ("" to go on); the chief's duties; whether the chief
  // evaluates now (then RecordEval). CANCELLED is a stop
  // (kServersShutDown), not an error.
  absl::StatusOr<TaskRun::Next> BeforeStep();

  // The parts of BeforeStep, one at a time. Chief: an evaluation is due at
  // the current weights; Evaluated() after it. A checkpoint asked for when
  // due.
  bool EvalDue() const;
  void Evaluated();
  // Also the chief's check of failed workers (Chief::CheckWorkers): its
  // FAILED_PRECONDITION ends the job.
  absl::Status MaybeRequestCheckpoint();

  // A finished step computed at `global_step`, with the last push's
  // outcome; `timings` as worker/session/records.h; writes the JSONL line,
  // the chief's scalars and the progress line.
  struct StepStats {
    int64_t global_step = 0;
    int64_t epoch = 0;
    int64_t batch_size = 0;
    double loss = 0.0;
    double train_accuracy = 0.0;
    int64_t batches_done = 0;  // this worker's batches so far
  };
  absl::Status RecordStep(const StepStats& stats, const StepTimings& timings);
  absl::Status RecordEval(EvalRecord record);

  // Every shard's status.
  absl::StatusOr<std::vector<ps::ShardStatus>> Status();
  // While on, the lease is renewed whenever the worker sends nothing for a
  // while (the caller computes or evaluates in its own code between our
  // calls: a step longer than the lease is not taken for a dead worker, as
  // the C++ worker's while it computes). Off until asked; Leave ends it.
  absl::Status KeepLease(bool on);
  // Leaves the live set; the chief then waits for the others to leave
  // (unless !wait_for_others: the chief ends the job now, e.g. on Ctrl-C)
  // and pulls the newest weights (for its final evaluation). OK when the
  // servers have already shut down.
  absl::Status Leave(bool wait_for_others = true);
  // After Leave: the chief's final checkpoint and Shutdown; the summaries.
  absl::Status Finish(const std::string& end_reason);
  const ClusterWorkerResult& result() const;

 private:
  ExternalWorker(ExternalWorkerOptions options, ClusterConfig config,
                 TaskId task, SessionTaskConfig settings);
  absl::Status CheckJoined() const;
  absl::Status CheckOverlap() const;
  absl::Status CheckGradients(
      int64_t step, absl::Span<const ps::NamedConstTensorView> gradients) const;
  absl::Status CheckVariables(const std::vector<VariableSpec>& mine);
  // The task's outputs, the samples' file and the run (not started).
  absl::Status OpenOutputs(int64_t total_batches);
  // Straggler emulation before a push: the delay after the caller's compute
  // (since the weights came), then the transfer's.
  void InjectBeforePush();
  // After a push from the weights at `step`: its sample record (with
  // record_samples).
  absl::Status RecordSamples(int64_t step);

  const ExternalWorkerOptions options_;
  const ClusterConfig config_;
  const TaskId task_;
  const SessionTaskConfig settings_;
  std::vector<VariableSpec> variables_;
  std::string run_dir_;
  std::unique_ptr<ps::RemotePsClient> client_;
  std::unique_ptr<TaskOutputs> outputs_;  // made by Join
  std::unique_ptr<TaskRun> run_;          // made by Join
  WorkerSession* session_ = nullptr;      // run_'s, once joined
  size_t parameters_ = 0;  // variables_'s first ones; the statistics after
  std::unique_ptr<StepOverlap> overlap_;  // with overlap, made by Join
  // The lease kept while KeepLease(true) (the caller computes between
  // calls).
  std::unique_ptr<LeaseKeeper::Hold> computing_;
  // record_samples: the file; the chunks leased, by (epoch, index), until a
  // push records them (those left at the Leave were never pushed); the
  // caller's ids for the next push.
  struct Leased {
    int64_t generation = 0;
    std::vector<int64_t> samples;
  };
  std::unique_ptr<SampleRecorder> samples_;
  std::map<std::pair<int64_t, int64_t>, Leased> leased_samples_;
  std::optional<std::vector<int64_t>> batch_samples_;
  PushOutcome last_push_;
  bool pushed_ = false;                  // a push since the last pull
  absl::Time weights_at_ = absl::Now();  // the last pull's end
  ClusterWorkerResult empty_result_;     // before Join
  // Interrupt's: the waits' stop, and the client whose pulls it interrupts
  // once Join has made it (client_, published under interrupt_mu_: Join
  // makes it on the calling thread while Interrupt comes from another).
  WaitStop wait_stop_;
  Mutex interrupt_mu_;
  ps::PsClient* interruptible_ ABSL_GUARDED_BY(interrupt_mu_) = nullptr;
  bool pulls_interrupted_ ABSL_GUARDED_BY(interrupt_mu_) = false;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_EXTERNAL_WORKER_H_
