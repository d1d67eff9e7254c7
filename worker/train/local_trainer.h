// Training in one process with the optimizer applied locally and no
// parameter server:
// the baseline that every distributed run is compared with (TensorFlow's
// cifar10_train.py in the seed experiments). //worker:train_local is a thin
// command line over RunLocalTraining.
//
// Each step: the next batch from the Batcher, Model::ComputeGradients,
// LocalOptimizer::Apply (the servers' optimizer: Adam, SGD or momentum
// SGD, with a learning-rate schedule given in epochs); one "train" metrics
// record per step and an "eval" record (test accuracy over the whole test set)
// every eval_every steps and at the end; progress lines on the log every
// log_every steps.
//
// A path of its own, not the cluster's run (worker/session/task_run.h) over
// an in-process server: it is the baseline that "1-worker cluster against
// train_local" (scripts/bench/cluster_overhead.sh) measures the servers
// against, so it must not contain them; what it shares with the run is the
// records and their sinks (worker/session/records.h, metric_sinks.h).
//
// Thread-safety: RunLocalTraining uses the calling thread (plus the
// batcher's producer and the backend's threads) and returns when done.
#ifndef PSGD_WORKER_TRAIN_LOCAL_TRAINER_H_
#define PSGD_WORKER_TRAIN_LOCAL_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/lr_schedule.h"
#include "common/metrics.h"
#include "ps/state/options.h"
#include "worker/data/dataset.h"

namespace psgd {

// The learning rate's schedule in epochs; RunLocalTraining turns it into
// the optimizer's schedule in steps (common/lr_schedule.h) once the steps
// per epoch are known.
struct EpochSchedule {
  // Linear from warmup_from x lr (in [0, 1]) to lr over the first
  // warmup_epochs (>= 0; rounded to whole steps).
  double warmup_epochs = 0;
  double warmup_from = 0;
  // After the warmup: constant; step (x decay_factor in (0, 1] every
  // decay_every_epochs > 0); or cosine down to final_factor x lr (in
  // [0, 1]) at the run's last step.
  LrSchedule::Decay decay = LrSchedule::Decay::kConstant;
  double decay_every_epochs = 0;
  double decay_factor = 0.1;
  double final_factor = 0;
};

struct LocalTrainerOptions {
  std::string model = "cifar10_tutorial";
  std::string backend = "cpu";
  int threads = 0;  // 0: one per core
  DataOptions data;
  int64_t batch_size = 128;
  // Exactly one of steps and epochs is positive.
  int64_t steps = 0;
  int64_t epochs = 10;
  // Steps between evaluations on the test set; 0: once per epoch.
  int64_t eval_every = 0;
  // Steps between progress lines; 0: never.
  int64_t log_every = 100;
  uint64_t seed = 1;
  // Its schedule is set from `schedule` (and ignored as given).
  ps::OptimizerOptions optimizer;
  EpochSchedule schedule;
};

// The optimizer's schedule in steps for `per_epoch` steps per epoch and
// `last_step` steps in all; INVALID_ARGUMENT naming the field when it is
// out of range (a warmup longer than the run included).
absl::StatusOr<LrSchedule> StepScheduleOf(const EpochSchedule& schedule,
                                          int64_t per_epoch, int64_t last_step);

// INVALID_ARGUMENT naming the first bad field.
absl::Status ValidateLocalTrainerOptions(const LocalTrainerOptions& options);

struct EvalPoint {
  int64_t step = 0;
  double epoch = 0.0;  // epochs completed, fractional
  double test_accuracy = 0.0;
  double test_loss = 0.0;
  double wall_time_s = 0.0;
};

struct LocalTrainingResult {
  int64_t steps = 0;
  double seconds = 0.0;
  double images_per_s = 0.0;  // training images over the training steps' time
  double final_loss = 0.0;    // of the last step
  // Mean training-batch accuracy over the last min(steps, 50) steps.
  double recent_train_accuracy = 0.0;
  std::vector<EvalPoint> evals;
};

// Trains and returns what happened. `metrics` (not owned, may be null)
// receives the records. Errors: the options' (INVALID_ARGUMENT), the data
// set's (NOT_FOUND / DATA_LOSS naming files), the backend's and the model's.
absl::StatusOr<LocalTrainingResult> RunLocalTraining(
    const LocalTrainerOptions& options, MetricsWriter* metrics);

// summary.json's fields for a finished run.
JsonObject SummaryOf(const LocalTrainerOptions& options,
                     const LocalTrainingResult& result);

}  // namespace psgd

#endif  // PSGD_WORKER_TRAIN_LOCAL_TRAINER_H_
