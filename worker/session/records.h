// What a worker reports: one StepRecord per step, one EvalRecord per
// evaluation, and a run's result. Plain values shared by the cluster worker
// (worker/cluster/cluster_worker.h), the local trainer
// (worker/train/local_trainer.h) and the metric sinks
// (worker/session/metric_sinks.h); no model and no network in them.
//
// Thread-safety: plain values.
#ifndef PSGD_WORKER_SESSION_RECORDS_H_
#define PSGD_WORKER_SESSION_RECORDS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "ps/state/types.h"
#include "worker/session/step_outcome.h"

namespace psgd {

struct StepRecord {
  int64_t local_step = 0;   // 1-based count of this worker's steps
  int64_t global_step = 0;  // the (lowest) shard step the gradient used
  int64_t epoch = 0;
  int64_t batch_size = 0;
  double wall_time_s = 0.0;  // since the run started, at the step's end
  double loss = 0.0;
  double cross_entropy = 0.0;
  double train_accuracy = 0.0;
  double images_per_s = 0.0;
  double step_s = 0.0;
  double input_s = 0.0;    // waiting for the batch
  double compute_s = 0.0;  // forward and backward
  double push_s = 0.0;     // a cluster worker's push
  double pull_s = 0.0;     // the pull after the push, less wait_s
  double wait_s = 0.0;     // sync: the servers waiting for the next step
  double apply_s = 0.0;    // local training: the optimizer's update
  // The learning rate of this step's update: local training's, or in a
  // cluster the servers' for the update that made the weights pulled after
  // the step (sync: the step pushed for; ps::ModelVersion::learning_rate).
  // < 0: not known (not written).
  double learning_rate = -1.0;
  int64_t staleness = 0;  // async: the largest over the shards
  // Sync: N of the step pushed for (the servers', which adaptive backup
  // workers choose per step); 0: not known (async, local training).
  int replicas_to_aggregate = 0;
  // Straggler emulation: the delay injected into this step (part of
  // compute_s, push_s and pull_s), so that a report can split real from
  // injected time.
  double injected_s = 0.0;
  // Emulated compute: compute_s was waited, not computed.
  bool emulated = false;
  // What became of the gradient (worker/session/step_outcome.h).
  StepOutcome outcome = StepOutcome::kApplied;
};

// The time points of one step, in order: the step began, its batch was
// ready, forward and backward were done, the push (or the local update)
// was done, the next weights were there. Fill() writes the phases into a
// record: input, compute, push, pull less the servers' wait, wait.
struct StepTimings {
  absl::Time begin;
  absl::Time batch_ready;
  absl::Time computed;
  absl::Time pushed;
  absl::Time pulled;

  // `server_wait`: how long the servers held the pull (ModelVersion's);
  // `run_start`: for wall_time_s.
  void Fill(absl::Duration server_wait, absl::Time run_start,
            StepRecord* record) const;
};

struct EvalRecord {
  int64_t global_step = 0;
  // Epochs done, fractional, where the trainer knows (local training; a
  // cluster's workers do not: -1).
  double epoch = -1.0;
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
  // Times the worker re-synced after a failure (Recovery::Recover).
  int64_t recoveries = 0;
  std::vector<EvalRecord> evals;  // chief
  // Chief: what the servers said at the end (one per shard).
  std::vector<ps::ShardStatus> server_status;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_RECORDS_H_
