// The worker loop of a cluster: pull from all shards, forward and backward,
// push to all shards, record what happened. Plain C++ over a ps::PsClient
// (gRPC in //worker:worker, in-process in tests), a Model and a Batcher.
//
// The chief (worker 0) also initialises the variables on the servers before
// anyone trains (the others wait for that in their first pull), evaluates
// the test set every eval_every global steps and at the end, waits for the
// other workers to leave, and tells the servers that training is over.
//
// Per step it reports (StepRecord): the global step the gradient was
// computed from, loss, training accuracy, images/s, and the step's time
// split into input, compute, push, pull and wait (the part of the pull the
// servers spent waiting for the step to be reached), the staleness and what
// the servers did with the gradient.
//
// Ending: a worker stops when the global step (the lowest shard step)
// reaches max_steps, when its data ends (epochs), or when the servers have
// shut down because the chief finished. It always leaves the servers' live
// set first, so a sync step never waits for it.
//
// Failures (docs/RELIABILITY.md): when a call fails because a server is
// unavailable (UNAVAILABLE, or a push past its deadline) or the cluster is
// rolling back (ABORTED), the worker re-syncs (Recover): it asks every shard
// for its status, retrying with backoff (50 ms doubling to 2 s) for up to
// ps_unavailable_timeout; when a restarted shard restored a checkpoint it
// rolls the whole cluster back to it (Rollback, the same request from every
// worker); then it joins again and goes on from the shards' weights. A push
// whose reply was lost is sent again (the shards that had it refuse the
// copy: StepOutcome::kDuplicate); a gradient computed before a rollback is
// dropped (StepOutcome::kRolledBack).
//
// Overlap (options.overlap): the push goes in parts from a sender thread as
// the backward produces the gradients, and in sync mode the pull after it
// goes in groups of variables, on threads of their own, which the next
// step's forward awaits variable by variable. When a group's pull fails or
// finds the shards moved between the groups, the worker pulls the whole
// model as it does without overlap (recovering, lining up) and computes the
// step again; a failed push in parts is sent again whole (Recover as
// above). The rules the shards apply are the same either way.
//
// Thread-safety: Run() uses the calling thread (plus the batcher's and the
// backend's own threads, and with overlap the sender's and the pulls'
// threads) and is called once.
#ifndef PSGD_WORKER_CLUSTER_CLUSTER_WORKER_H_
#define PSGD_WORKER_CLUSTER_CLUSTER_WORKER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/client/ps_client.h"
#include "worker/cluster/overlap.h"
#include "worker/cluster/step_outcome.h"
#include "worker/data/batcher.h"
#include "worker/data/image_set.h"
#include "worker/models/model.h"

namespace psgd {

struct ClusterWorkerOptions {
  int worker_id = 0;
  // Worker 0: initialises, evaluates, shuts the servers down at the end.
  bool chief = false;
  bool sync = true;
  // Stop once the global step reaches this; 0: when the data ends.
  int64_t max_steps = 0;
  // Also stop once this long has passed since Run() started; zero: no limit.
  absl::Duration max_time = absl::ZeroDuration();
  // Chief: evaluate every this many global steps (0: only at the end), on
  // the first eval_examples test images (0: all); the final evaluation
  // always uses the whole test set.
  int64_t eval_every = 0;
  int64_t eval_examples = 0;
  int64_t eval_batch = 500;
  // Chief: seed of the initial values.
  uint64_t seed = 1;
  // A progress line every this many local steps (0: never).
  int64_t log_every = 50;
  // The first pull waits this long for the chief's initialisation.
  absl::Duration start_timeout = absl::Minutes(5);
  // A later pull waits this long for its step.
  absl::Duration step_timeout = absl::Minutes(10);
  // Chief: how long to wait for the other workers to leave before shutting
  // the servers down anyway.
  absl::Duration finish_timeout = absl::Minutes(5);
  // How long to keep retrying while a server is unavailable before giving
  // up with its error (zero: give up at once).
  absl::Duration ps_unavailable_timeout = absl::Minutes(5);
  // Chief: ask every shard for a checkpoint this often, at a step just
  // ahead of the newest (zero: never); and a final one before shutting the
  // servers down (when they have a checkpoint directory).
  absl::Duration checkpoint_every = absl::ZeroDuration();
  bool final_checkpoint = false;
  // Overlap (the config's wire { overlap: true }; docs/CLUSTER.md,
  // "Overlap"): push each gradient as a part as soon as the backward has
  // produced it, and (sync) pull the next step's weights in groups of
  // variables so that the forward starts on the first layers while the
  // rest arrive.
  bool overlap = false;
};

// INVALID_ARGUMENT naming the first bad field.
absl::Status ValidateClusterWorkerOptions(const ClusterWorkerOptions& options);

struct StepRecord {
  int64_t local_step = 0;   // 1-based count of this worker's steps
  int64_t global_step = 0;  // the (lowest) shard step the gradient used
  int64_t epoch = 0;
  int64_t batch_size = 0;
  double wall_time_s = 0.0;  // since Run() started, at the step's end
  double loss = 0.0;
  double cross_entropy = 0.0;
  double train_accuracy = 0.0;
  double images_per_s = 0.0;
  double step_s = 0.0;
  double input_s = 0.0;    // waiting for the batch
  double compute_s = 0.0;  // forward and backward
  double push_s = 0.0;
  double pull_s = 0.0;  // the pull after the push, less wait_s
  double wait_s = 0.0;  // sync: the servers waiting for the next step
  int64_t staleness = 0;  // async: the largest over the shards
  // What became of the gradient (worker/cluster/step_outcome.h).
  StepOutcome outcome = StepOutcome::kApplied;
};

struct EvalRecord {
  int64_t global_step = 0;
  double wall_time_s = 0.0;
  double test_accuracy = 0.0;
  double test_loss = 0.0;
  int64_t examples = 0;
  double eval_s = 0.0;
  bool final = false;
};

struct ClusterWorkerResult {
  int64_t local_steps = 0;
  int64_t final_global_step = 0;
  double seconds = 0.0;
  double images_per_s = 0.0;  // images over the time spent in steps
  std::string end_reason;
  std::map<StepOutcome, int64_t> outcomes;  // StepRecord::outcome -> count
  // Sync: steps computed from shards at different steps (LineUp gave up).
  int64_t unaligned_steps = 0;
  // Times the worker re-synced after a failure (Recover).
  int64_t recoveries = 0;
  std::vector<EvalRecord> evals;             // chief
  // Chief: what the servers said at the end (one per shard).
  std::vector<ps::ShardStatus> server_status;
};

struct ClusterWorkerCallbacks {
  std::function<absl::Status(const StepRecord&)> on_step;
  std::function<absl::Status(const EvalRecord&)> on_eval;
};

class ClusterWorker {
 public:
  // Nothing is owned; all must outlive Run(). `test` is used by the chief
  // only (may be null for others).
  ClusterWorker(ps::PsClient* client, Model* model, Batcher* train,
                const ImageSet* test, ClusterWorkerOptions options,
                ClusterWorkerCallbacks callbacks);

  // Trains until one of the endings above. Errors: the client's (e.g.
  // DEADLINE_EXCEEDED when a step does not come within step_timeout,
  // UNAVAILABLE when a server stays unreachable for ps_unavailable_timeout,
  // FAILED_PRECONDITION for a server of another cluster), the model's, the
  // batcher's, the callbacks'.
  absl::StatusOr<ClusterWorkerResult> Run();

 private:
  // Run's steps, in order. Start: the chief initialises the servers; every
  // worker joins and pulls the first weights (and, at step 0, waits for the
  // others to join).
  absl::Status Start();
  // Why the worker stops before its next step (max_steps reached, time
  // budget spent), or empty to go on.
  std::string StopReason(const ps::ModelVersion& version) const;
  // Between steps: the chief asks for a checkpoint and evaluates when due.
  absl::Status BetweenSteps();
  // The chief's evaluation is due at `version`.
  bool EvalDue(const ps::ModelVersion& version) const;
  // One step: batch, forward and backward, push (recovering from failures),
  // pull, record. False when the worker stops (data ended, servers shut
  // down), with result_.end_reason set.
  absl::StatusOr<bool> Step();
  // The push of one step, recovering from transient failures. Sets the
  // record's outcome and staleness; returns the generation the cluster is
  // in afterwards (another one when it rolled back), CANCELLED when the
  // servers shut down.
  // `pushed` is the first try's result (whole, or in parts).
  absl::StatusOr<int64_t> PushWithRecovery(
      const NamedTensors& gradients, StepRecord* record,
      absl::StatusOr<ps::PushResult> pushed);
  // The version a push is tagged with: sync pushes only to the shards at
  // the lowest step (PushVersion).
  ps::ModelVersion PushTarget() const;
  // Forward and backward; the push whole, or (overlap) in parts as the
  // backward goes. Sets *t2 at the end of the backward. When overlap fell
  // back to a whole pull that reached a step to stop at, sets *stop to the
  // reason and computes and pushes nothing.
  absl::StatusOr<StepResult> ComputeAndPush(
      const Batch& batch, absl::StatusOr<ps::PushResult>* pushed,
      absl::Time* t2, std::string* stop);
  // Overlap: forward on weights still arriving, gradients sent as parts.
  // False when a group's pull failed or the shards moved between the
  // groups: nothing was sent, and the weights are pulled whole again.
  absl::StatusOr<bool> ComputeOverlapped(const Batch& batch,
                                         StepResult* result);
  // Overlap: waits for the groups' pulls; version_ becomes theirs when they
  // agree (and, sync, the shards are at one step), else an error.
  absl::Status JoinGroups();
  // Overlap: the groups' pulls in flight, if any, joined (JoinGroups); when
  // that fails, the whole model pulled again as PullAfterPush would.
  absl::Status SettlePulls();
  absl::Status PullWhole(const ps::ModelVersion& wanted);
  // The version of the weights the next step computes from: version_, or
  // (overlap) the one the pulls in flight wait for.
  const ps::ModelVersion& AheadVersion() const;
  // The pull that follows a push: sync waits until every shard is past the
  // step pushed to it, then lines the shards up; async takes any newer
  // weights. Updates version_.
  absl::Status PullAfterPush(const StepRecord& record, int64_t generation);
  // Fills the step's record, reports it and logs a progress line.
  absl::Status Record(StepRecord* record, const StepResult& result,
                      const Batch& batch, absl::Time t0, absl::Time t1,
                      absl::Time t2, absl::Time t3, absl::Time t4);
  // After the last step: leave the live set, and the chief's end of run.
  absl::Status Finish();

  // At the start of training, waits (up to start_timeout) until every
  // worker has joined, or the training has started without this one.
  absl::Status AwaitOtherWorkers();
  // Sync: after a pull that found the shards at different steps, waits a
  // moment for all to reach the newest, so that the next gradient is
  // computed from one step of every shard. Returns the version pulled.
  absl::StatusOr<ps::ModelVersion> LineUp(ps::ModelVersion version);
  absl::Status Evaluate(int64_t global_step, bool final);
  absl::Status FinishAsChief();

  // After `cause` (a transient failure): waits until every shard answers
  // and they agree on one generation, rolling the cluster back when a
  // restarted shard restored a checkpoint, and joins again. Returns the
  // generation. CANCELLED when the servers shut down; the last failure when
  // ps_unavailable_timeout passes; the Rollback's error when a checkpoint
  // cannot be loaded.
  absl::StatusOr<int64_t> Recover(const absl::Status& cause);
  // Pull(wanted) that recovers from transient failures: after a recovery it
  // pulls again, from the new generation without waiting when the cluster
  // rolled back. With `line_up` (sync), LineUp follows a pull that waited.
  absl::StatusOr<ps::ModelVersion> PullSynced(ps::ModelVersion wanted,
                                              absl::Duration timeout,
                                              bool line_up);
  // call() until it succeeds or fails with anything but a transient error,
  // recovering in between.
  absl::Status Retrying(const std::function<absl::Status()>& call);
  // Chief: every checkpoint_every, asks the shards for a checkpoint.
  void MaybeRequestCheckpoint(const ps::ModelVersion& version);

  ps::PsClient* const client_;  // Not owned.
  Model* const model_;          // Not owned.
  Batcher* const train_;        // Not owned.
  const ImageSet* const test_;  // Not owned.
  const ClusterWorkerOptions options_;
  const ClusterWorkerCallbacks callbacks_;

  NamedTensors weights_;
  NamedTensors gradients_;
  // The version of weights_: each shard's step and the generation.
  ps::ModelVersion version_;
  absl::Time start_;
  int64_t next_eval_ = 0;
  // For progress lines: time in steps and images since the start, loss
  // over the steps since the last line.
  double step_seconds_ = 0.0;
  int64_t images_ = 0;
  double window_loss_ = 0.0;
  int64_t window_steps_ = 0;
  absl::Time next_checkpoint_ = absl::InfiniteFuture();
  ClusterWorkerResult result_;
  // Overlap only (null otherwise; the puller in sync mode only).
  std::unique_ptr<PartSender> sender_;
  std::unique_ptr<GroupPuller> puller_;
};

// The lowest and the highest of the shards' steps.
int64_t GlobalStep(const ps::ModelVersion& version);
int64_t NewestStep(const ps::ModelVersion& version);
// What a sync worker pushes after pulling `version`: the shards at the
// lowest step keep it, the others are ps::kNoPush (they are a step ahead).
ps::ModelVersion PushVersion(const ps::ModelVersion& version);

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_CLUSTER_WORKER_H_
