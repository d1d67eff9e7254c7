// The C++ front end of a worker task: the run of every front end
// (worker/session/task_run.h: start, stop reasons, the chief's duties, the
// records, leave and finish) driven with a Model and a Batcher. What it
// adds: per step the next batch, forward and backward (overlapped with the
// pushes of parts and the pulls of groups when the config says so, in
// worker/session/step_overlap.h's order), the push and the pull of the next
// weights; the chief's evaluations of the test set; batch norm's
// statistics (worker/cluster/worker_statistics.h); the end when the data
// ends (epochs).
//
// Thread-safety: Run() uses the calling thread (plus the batcher's, the
// backend's and, with overlap, the session's threads) and is called once.
#ifndef PSGD_WORKER_CLUSTER_CLUSTER_WORKER_H_
#define PSGD_WORKER_CLUSTER_CLUSTER_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/client/ps_client.h"
#include "worker/cluster/worker_statistics.h"
#include "worker/data/batcher.h"
#include "worker/data/image_set.h"
#include "worker/models/model.h"
#include "worker/session/chief.h"
#include "worker/session/records.h"
#include "worker/session/sample_records.h"
#include "worker/session/step_overlap.h"
#include "worker/session/stragglers.h"
#include "worker/session/task_run.h"
#include "worker/session/worker_session.h"

namespace psgd {

// The session's options (worker_id, sync, the timeouts, overlap) and the
// chief's (eval_every, checkpoint_every, final_checkpoint, finish_timeout)
// with the loop's own.
struct ClusterWorkerOptions : SessionOptions, ChiefOptions {
  // Worker 0: initialises, evaluates, shuts the servers down at the end.
  bool chief = false;
  // Stop once the global step reaches this; 0: when the data ends.
  int64_t max_steps = 0;
  // Also stop once this long has passed since Run() started; zero: no limit.
  absl::Duration max_time = absl::ZeroDuration();
  // Chief: evaluate on the first eval_examples test images (0: all); the
  // final evaluation always uses the whole test set.
  int64_t eval_examples = 0;
  int64_t eval_batch = 500;
  // Chief: seed of the initial values.
  uint64_t seed = 1;
  // A progress line every this many local steps (0: never).
  int64_t log_every = 50;
  // Batch norm's running statistics: on the servers, or each worker's own
  // in local_statistics_file (worker/cluster/worker_statistics.h).
  bool statistics_on_servers = true;
  std::string local_statistics_file;
  int64_t local_statistics_every = 100;
  // Straggler emulation (ClusterConfig.stragglers) for this worker.
  StragglerEmulator stragglers;
  // The model computes nothing (EmulatedModel): the step lines say so.
  bool emulated = false;
  // data { record_samples: true }: each push's chunk, outcome and batch
  // examples, a JSON line appended to this file
  // (worker/session/sample_records.h); empty: none.
  std::string samples_file;
};

// INVALID_ARGUMENT naming the first bad field (the session's options
// through ValidateSessionOptions).
absl::Status ValidateClusterWorkerOptions(const ClusterWorkerOptions& options);

using ClusterWorkerCallbacks = RunCallbacks;

class ClusterWorker {
 public:
  // Nothing is owned; all must outlive Run(). `test` is used by the chief
  // only (may be null for others).
  ClusterWorker(ps::PsClient* client, Model* model, Batcher* train,
                const ImageSet* test, ClusterWorkerOptions options,
                ClusterWorkerCallbacks callbacks);
  ~ClusterWorker();

  // Trains until one of the endings above. Errors: the session's (e.g.
  // DEADLINE_EXCEEDED when a step does not come within step_timeout,
  // UNAVAILABLE when a server stays unreachable for ps_unavailable_timeout,
  // FAILED_PRECONDITION for a server of another cluster), the model's, the
  // batcher's, the callbacks'.
  absl::StatusOr<ClusterWorkerResult> Run();

 private:
  // A step's forward/backward result and what became of its push.
  struct Computed {
    StepResult result;
    PushOutcome pushed;
    absl::Time computed;
  };

  absl::Status Start();
  // Before a step (TaskRun::BeforeStep) and the chief's evaluation. False
  // to stop.
  absl::StatusOr<bool> BeforeStep();
  // One step. False when the worker stops (data ended, servers shut down).
  absl::StatusOr<bool> Step();
  // The step's batch: the batcher's next, or with the servers handing out
  // the data the batch of the chunk leased (OUT_OF_RANGE: the data ended).
  absl::StatusOr<Batch> NextBatch();
  // Forward, backward and the push (whole, or in parts with overlap).
  // nullopt when overlap's pulls reached a step to stop at: nothing pushed.
  absl::StatusOr<std::optional<Computed>> ComputeAndPush(const Batch& batch);
  // Records a finished step, reports it and logs a progress line.
  absl::Status Record(StepRecord* record, const Computed& computed,
                      const Batch& batch, const StepTimings& timings);
  absl::Status Evaluate(int64_t global_step, bool final);
  // After the last step: leave the live set, the statistics saved, the
  // chief's final evaluation, the run's end.
  absl::Status Finish();
  // A line in the worker's sample records for a chunk it leased and never
  // pushed (sample_records.h); nothing without records.
  absl::Status RecordNotPushed(int64_t generation, int64_t epoch, int64_t index,
                               const std::vector<int64_t>& samples);
  // A stop for `reason`: false, with end_reason_ set.
  bool End(std::string reason);
  // The run's session (after Start).
  WorkerSession* session() const { return run_->session(); }
  // What a push carries: the gradients and, with the statistics on the
  // servers, the step's batch statistics.
  std::vector<ps::NamedConstTensorView> PushViews() const;

  ps::PsClient* const client_;  // Not owned.
  Model* const model_;          // Not owned.
  Batcher* const train_;        // Not owned.
  const ImageSet* const test_;  // Not owned.
  const ClusterWorkerOptions options_;
  const ClusterWorkerCallbacks callbacks_;

  NamedTensors weights_;
  NamedTensors gradients_;
  WorkerStatistics statistics_;
  std::unique_ptr<TaskRun> run_;             // made by Start
  std::unique_ptr<StepOverlap> overlap_;     // with overlap, made by Start
  std::unique_ptr<SampleRecorder> samples_;  // samples_file's, by Start
  int64_t chunk_generation_ = 0;  // the queue generation of the chunk leased
  std::string end_reason_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_CLUSTER_WORKER_H_
