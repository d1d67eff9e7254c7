#include "worker/train/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/backend_factory/factory.h"
#include "worker/data/batcher.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"
#include "worker/session/metric_sinks.h"
#include "worker/train/evaluate.h"
#include "worker/train/local_optimizer.h"

namespace psgd {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

absl::Status ValidateLocalTrainerOptions(const LocalTrainerOptions& o) {
  if ((o.steps > 0) == (o.epochs > 0) || o.steps < 0 || o.epochs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("exactly one of steps (", o.steps, ") and epochs (",
                     o.epochs, ") must be positive"));
  }
  if (o.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size is ", o.batch_size, ", must be >= 1"));
  }
  if (o.eval_every < 0 || o.log_every < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_every (", o.eval_every, ") and log_every (",
                     o.log_every, ") must not be negative"));
  }
  if (o.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads is ", o.threads, ", must be >= 0"));
  }
  const EpochSchedule& e = o.schedule;
  auto bad = [](absl::string_view field, double value, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning-rate schedule: ", field, " is ", value, ", ", rule));
  };
  if (!(e.warmup_epochs >= 0) || !std::isfinite(e.warmup_epochs)) {
    return bad("warmup_epochs", e.warmup_epochs, "must be >= 0 and finite");
  }
  if (e.decay == LrSchedule::Decay::kStep &&
      (!(e.decay_every_epochs > 0) || !std::isfinite(e.decay_every_epochs))) {
    return bad("decay_every_epochs", e.decay_every_epochs,
               "must be > 0 and finite for step decay");
  }
  // The schedule's factors are checked here, before any file is written; the
  // warmup against the run's length once the steps per epoch are known.
  ps::OptimizerOptions checked = o.optimizer;
  ASSIGN_OR_RETURN(checked.schedule,
                   StepScheduleOf(e, /*per_epoch=*/1, /*last_step=*/0));
  return ps::ValidateOptimizerOptions(checked, "optimizer option ");
}

absl::StatusOr<LrSchedule> StepScheduleOf(const EpochSchedule& e,
                                          int64_t per_epoch,
                                          int64_t last_step) {
  LrSchedule s;
  s.warmup_steps = std::llround(e.warmup_epochs * per_epoch);
  s.warmup_from = e.warmup_from;
  s.decay = e.decay;
  s.decay_factor = e.decay_factor;
  s.final_factor = e.final_factor;
  if (e.decay == LrSchedule::Decay::kStep) {
    s.decay_every =
        std::max<int64_t>(1, std::llround(e.decay_every_epochs * per_epoch));
  }
  if (e.decay == LrSchedule::Decay::kCosine) {
    s.decay_steps = std::max<int64_t>(1, last_step - s.warmup_steps);
  }
  RETURN_IF_ERROR(ValidateLrSchedule(s, last_step));
  return s;
}

absl::StatusOr<LocalTrainingResult> RunLocalTraining(
    const LocalTrainerOptions& options, MetricsWriter* metrics) {
  RETURN_IF_ERROR(ValidateLocalTrainerOptions(options));
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(Dataset data, OpenDataset(options.data));
  BackendOptions backend_options;
  backend_options.threads = options.threads;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(options.backend, backend_options));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   CreateModel(options.model, backend.get()));

  BatcherOptions bo;
  bo.batch_size = options.batch_size;
  bo.epochs = options.steps > 0 ? 0 : options.epochs;
  bo.seed = options.seed;
  bo.pipeline = BatcherOptions::PipelineFor(model->image_shape());
  ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batches,
                   Batcher::Create(&data.train, bo));
  const int64_t per_epoch = batches->batches_per_epoch();
  const int64_t eval_every =
      options.eval_every > 0 ? options.eval_every : per_epoch;
  spdlog::info(
      "train_local: model {} on {}, data {} ({} training, {} test images), "
      "batch {}, {} steps per epoch, {}",
      options.model, options.backend, data.name, data.train.count(),
      data.test.count(), options.batch_size, per_epoch,
      options.steps > 0 ? absl::StrCat(options.steps, " steps")
                        : absl::StrCat(options.epochs, " epochs"));

  NamedTensors weights = InitialValues(model->variables(), options.seed);
  NamedTensors gradients;
  ps::OptimizerOptions optimizer_options = options.optimizer;
  ASSIGN_OR_RETURN(
      optimizer_options.schedule,
      StepScheduleOf(
          options.schedule, per_epoch,
          options.steps > 0 ? options.steps : options.epochs * per_epoch));
  ASSIGN_OR_RETURN(
      std::unique_ptr<LocalOptimizer> optimizer,
      LocalOptimizer::Create(optimizer_options, model->variables()));
  spdlog::info("train_local: {} learning rate {} ({})",
               std::string(ps::OptimizerKindName(optimizer_options.kind)),
               optimizer_options.learning_rate,
               LrScheduleToString(optimizer_options.schedule));
  LocalTrainingResult result;
  std::deque<double> recent_accuracy;
  double train_seconds = 0.0, window_seconds = 0.0, window_loss = 0.0;
  int64_t window_steps = 0;

  // The run's lines, written as a cluster worker's (task "local").
  std::optional<MetricSinks> sinks;
  if (metrics != nullptr) sinks.emplace("local", metrics, nullptr, nullptr);
  auto evaluate = [&](int64_t step) -> absl::Status {
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(StepResult r,
                     EvaluateTestSet(model.get(), data.test, ViewsOf(weights),
                                     options.batch_size));
    EvalPoint p;
    p.step = step;
    p.epoch = static_cast<double>(step) / per_epoch;
    p.test_accuracy = r.accuracy();
    p.test_loss = r.loss;
    p.wall_time_s = Seconds(start, Clock::now());
    result.evals.push_back(p);
    spdlog::info(
        "step {} (epoch {:.2f}): test accuracy {:.4f}, test loss {:.4f} "
        "({} images, {:.1f} s)",
        step, p.epoch, p.test_accuracy, p.test_loss, r.examples,
        Seconds(t0, Clock::now()));
    if (!sinks.has_value()) return absl::OkStatus();
    EvalRecord e;
    e.global_step = step;
    e.epoch = p.epoch;
    e.wall_time_s = p.wall_time_s;
    e.test_accuracy = p.test_accuracy;
    e.test_loss = p.test_loss;
    e.examples = r.examples;
    e.eval_s = Seconds(t0, Clock::now());
    return sinks->WriteEval(e);
  };

  int64_t step = 0;
  while (options.steps == 0 || step < options.steps) {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<Batch> batch = batches->Next();
    if (absl::IsOutOfRange(batch.status())) break;
    RETURN_IF_ERROR(batch.status());
    const Clock::time_point t1 = Clock::now();
    ASSIGN_OR_RETURN(StepResult r, model->ComputeGradients(
                                       ViewsOf(weights), batch->images.view(),
                                       batch->labels, &gradients));
    const Clock::time_point t2 = Clock::now();
    const double learning_rate = optimizer->next_learning_rate();
    RETURN_IF_ERROR(optimizer->Apply(gradients, &weights));
    const Clock::time_point t3 = Clock::now();
    ++step;
    const double step_s = Seconds(t0, t3);
    train_seconds += step_s;
    result.final_loss = r.loss;
    recent_accuracy.push_back(r.accuracy());
    if (recent_accuracy.size() > 50) recent_accuracy.pop_front();
    window_seconds += step_s;
    window_loss += r.loss;
    ++window_steps;
    if (sinks.has_value()) {
      StepRecord rec;
      rec.local_step = rec.global_step = step;
      rec.epoch = batch->epoch;
      rec.batch_size = r.examples;
      rec.wall_time_s = Seconds(start, t3);
      rec.loss = r.loss;
      rec.cross_entropy = r.cross_entropy;
      rec.train_accuracy = r.accuracy();
      rec.step_s = step_s;
      rec.images_per_s = r.examples / step_s;
      rec.input_s = Seconds(t0, t1);
      rec.compute_s = Seconds(t1, t2);
      rec.apply_s = Seconds(t2, t3);
      rec.learning_rate = learning_rate;
      StepContext context;
      context.train_examples = data.train.count();
      RETURN_IF_ERROR(sinks->WriteStep(rec, context));
    }
    if (options.log_every > 0 && step % options.log_every == 0) {
      const double acc =
          std::accumulate(recent_accuracy.begin(), recent_accuracy.end(), 0.0) /
          recent_accuracy.size();
      spdlog::info(
          "step {} (epoch {}): loss {:.4f}, train accuracy {:.3f}, "
          "{:.0f} images/s",
          step, batch->epoch + 1, window_loss / window_steps, acc,
          window_steps * options.batch_size / window_seconds);
      window_seconds = window_loss = 0.0;
      window_steps = 0;
    }
    if (step % eval_every == 0) RETURN_IF_ERROR(evaluate(step));
  }
  if (step == 0) {
    return absl::FailedPreconditionError("train_local: no training step ran");
  }
  if (step % eval_every != 0) RETURN_IF_ERROR(evaluate(step));

  result.steps = step;
  result.seconds = Seconds(start, Clock::now());
  result.images_per_s = step * options.batch_size / train_seconds;
  result.recent_train_accuracy =
      std::accumulate(recent_accuracy.begin(), recent_accuracy.end(), 0.0) /
      recent_accuracy.size();
  return result;
}

JsonObject SummaryOf(const LocalTrainerOptions& options,
                     const LocalTrainingResult& result) {
  JsonObject s;
  s.Set("program", "train_local")
      .Set("mode", "local")
      .Set("model", options.model)
      .Set("backend", options.backend)
      .Set("threads", options.threads)
      .Set("data", options.data.name)
      .Set("batch", options.batch_size)
      .Set("optimizer",
           std::string(ps::OptimizerKindName(options.optimizer.kind)))
      .Set("learning_rate", options.optimizer.learning_rate)
      .Set("seed", static_cast<int64_t>(options.seed))
      .Set("steps", result.steps)
      .Set("seconds", result.seconds)
      .Set("images_per_s", result.images_per_s)
      .Set("final_loss", result.final_loss)
      .Set("recent_train_accuracy", result.recent_train_accuracy);
  if (!result.evals.empty()) {
    double best = 0.0;
    for (const EvalPoint& p : result.evals)
      best = std::max(best, p.test_accuracy);
    s.Set("final_test_accuracy", result.evals.back().test_accuracy)
        .Set("best_test_accuracy", best)
        .Set("epochs", result.evals.back().epoch);
  }
  return s;
}

}  // namespace psgd
