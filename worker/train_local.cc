// train_local: a model trained in one process with the servers' optimizer
// applied locally, no parameter server (the baseline of every distributed
// run).
//
//   bazel run -c opt //worker:train_local -- --data=cifar10
//       --data_dir=/path/to/cifar-10-batches-bin --epochs=10   (one line)
//   bazel run -c opt //worker:train_local -- --data=synthetic --steps=300
//   bazel run -c opt //worker:train_local -- --model=resnet20 --epochs=10
//       --optimizer=momentum --learning_rate=0.1 --momentum=0.9 --nesterov
//       --weight_decay=5e-4 --warmup_epochs=1 --warmup_from=0.1
//       --lr_decay=cosine                                      (one line)
//
// Prints progress (step, loss, train accuracy, images/s; test accuracy every
// --eval_every steps) and writes metrics.jsonl and summary.json to the run
// directory (runs/train_local-YYYYMMDD-HHMMSS by default).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/lr_schedule.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "ps/state/optimizer_flags.h"
#include "spdlog/spdlog.h"
#include "worker/cli.h"
#include "worker/paths.h"
#include "worker/train/local_trainer.h"

ABSL_FLAG(std::string, data, "cifar10", "Data set: cifar10 or synthetic.");
ABSL_FLAG(std::string, data_dir, "data",
          "CIFAR-10 binary files: the cifar-10-batches-bin directory or its "
          "parent (scripts/run/get_cifar10.sh puts it in data/).");
ABSL_FLAG(int64_t, batch, 128, "Images per step.");
ABSL_FLAG(int64_t, steps, 0, "Training steps (instead of --epochs).");
ABSL_FLAG(int64_t, epochs, 0,
          "Passes over the training set (default 10 unless --steps is given).");
ABSL_FLAG(int64_t, eval_every, 0,
          "Steps between test-set evaluations; 0: once per epoch.");
ABSL_FLAG(int64_t, log_every, 100, "Steps between progress lines; 0: none.");
ABSL_FLAG(int, threads, 0, "Compute threads; 0: one per core.");
ABSL_FLAG(uint64_t, seed, 1,
          "Seed of initial weights, shuffling, distortions.");
ABSL_FLAG(double, warmup_epochs, 0,
          "Epochs of linear warmup from --warmup_from x lr to lr.");
ABSL_FLAG(double, warmup_from, 0,
          "The warmup's first factor of the learning rate, in [0, 1].");
ABSL_FLAG(std::string, lr_decay, "constant",
          "After the warmup: constant, step (x --decay_factor every "
          "--decay_every_epochs) or cosine (to --final_factor x lr at the "
          "last step).");
ABSL_FLAG(double, decay_every_epochs, 0, "--lr_decay=step: epochs per decay.");
ABSL_FLAG(double, decay_factor, 0.1, "--lr_decay=step: factor per decay.");
ABSL_FLAG(double, final_factor, 0, "--lr_decay=cosine: the last factor.");
ABSL_FLAG(std::string, run_dir, "",
          "Where metrics.jsonl and summary.json go; default "
          "runs/train_local-YYYYMMDD-HHMMSS.");
ABSL_FLAG(std::string, model, "cifar10_tutorial", "Model, by registry name.");
ABSL_FLAG(std::string, backend, "cpu", "Compute backend: cpu or cpu:OPTIONS.");
ABSL_FLAG(int64_t, synthetic_train, 10000,
          "--data=synthetic: training images.");
ABSL_FLAG(int64_t, synthetic_test, 2000, "--data=synthetic: test images.");

namespace psgd {
namespace {

absl::StatusOr<LocalTrainerOptions> OptionsFromFlags() {
  LocalTrainerOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.data.name = absl::GetFlag(FLAGS_data);
  o.data.data_dir = ResolveUserPath(absl::GetFlag(FLAGS_data_dir));
  o.data.synthetic_train = absl::GetFlag(FLAGS_synthetic_train);
  o.data.synthetic_test = absl::GetFlag(FLAGS_synthetic_test);
  o.batch_size = absl::GetFlag(FLAGS_batch);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  if (o.steps > 0 && o.epochs > 0) {
    return absl::InvalidArgumentError("give --steps or --epochs, not both");
  }
  if (o.steps == 0 && o.epochs == 0) o.epochs = 10;
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.log_every = absl::GetFlag(FLAGS_log_every);
  o.seed = absl::GetFlag(FLAGS_seed);
  ASSIGN_OR_RETURN(o.optimizer, ps::OptimizerOptionsFromFlags());
  o.schedule.warmup_epochs = absl::GetFlag(FLAGS_warmup_epochs);
  o.schedule.warmup_from = absl::GetFlag(FLAGS_warmup_from);
  const std::string decay = absl::GetFlag(FLAGS_lr_decay);
  if (decay == "constant") {
    o.schedule.decay = LrSchedule::Decay::kConstant;
  } else if (decay == "step") {
    o.schedule.decay = LrSchedule::Decay::kStep;
  } else if (decay == "cosine") {
    o.schedule.decay = LrSchedule::Decay::kCosine;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lr_decay=", decay, ": expected constant, step or cosine"));
  }
  o.schedule.decay_every_epochs = absl::GetFlag(FLAGS_decay_every_epochs);
  o.schedule.decay_factor = absl::GetFlag(FLAGS_decay_factor);
  o.schedule.final_factor = absl::GetFlag(FLAGS_final_factor);
  if (o.data.name != "cifar10" && o.data.name != "synthetic") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data=", o.data.name, ": expected cifar10 or synthetic"));
  }
  RETURN_IF_ERROR(ValidateLocalTrainerOptions(o));
  return o;
}

absl::Status Run() {
  ASSIGN_OR_RETURN(LocalTrainerOptions options, OptionsFromFlags());
  ASSIGN_OR_RETURN(
      std::string run_dir,
      CreateRunDir(ResolveUserPath(absl::GetFlag(FLAGS_run_dir)),
                   ResolveUserPath("runs"), "train_local", absl::Now()));
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsWriter> metrics,
                   MetricsWriter::Open(run_dir + "/metrics.jsonl"));
  spdlog::info("train_local: run directory {}", run_dir);
  ASSIGN_OR_RETURN(LocalTrainingResult result,
                   RunLocalTraining(options, metrics.get()));
  RETURN_IF_ERROR(
      WriteJsonFile(run_dir + "/summary.json", SummaryOf(options, result)));
  std::printf(
      "train_local: %lld steps in %.1f s (%.0f images/s while training); "
      "final test accuracy %.4f; metrics in %s\n",
      static_cast<long long>(result.steps), result.seconds, result.images_per_s,
      result.evals.empty() ? 0.0 : result.evals.back().test_accuracy,
      run_dir.c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  return psgd::RunProgram(
      argc, argv, "train_local",
      "Trains a model in one process with the optimizer applied locally; see "
      "--helpfull.",
      psgd::Run);
}
