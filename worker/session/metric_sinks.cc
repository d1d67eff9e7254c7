#include "worker/session/metric_sinks.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

double UnixSeconds() { return absl::ToUnixMicros(absl::Now()) / 1e6; }

}  // namespace

JsonObject StepJson(const std::string& task, const StepRecord& r) {
  JsonObject line;
  line.Set("kind", "train")
      .Set("task", task)
      .Set("step", r.global_step)
      .Set("local_step", r.local_step)
      .Set("epoch", r.epoch)
      .Set("wall_time_s", r.wall_time_s)
      .Set("loss", r.loss)
      .Set("cross_entropy", r.cross_entropy)
      .Set("train_accuracy", r.train_accuracy)
      .Set("batch_size", r.batch_size)
      .Set("images_per_s", r.images_per_s)
      .Set("step_s", r.step_s)
      .Set("input_wait_s", r.input_s)
      .Set("compute_s", r.compute_s)
      .Set("push_s", r.push_s)
      .Set("pull_s", r.pull_s)
      .Set("wait_s", r.wait_s)
      .Set("apply_s", r.apply_s)
      .Set("staleness", r.staleness)
      .Set("outcome", StepOutcomeName(r.outcome))
      .Set("injected_s", r.injected_s);
  if (r.emulated) line.Set("emulated", true);
  if (r.replicas_to_aggregate > 0) {
    line.Set("replicas_to_aggregate",
             static_cast<int64_t>(r.replicas_to_aggregate));
  }
  if (r.learning_rate >= 0) line.Set("learning_rate", r.learning_rate);
  return line;
}

JsonObject EvalJson(const std::string& task, const EvalRecord& e) {
  JsonObject line;
  line.Set("kind", "eval")
      .Set("task", task)
      .Set("step", e.global_step)
      .Set("wall_time_s", e.wall_time_s)
      .Set("test_accuracy", e.test_accuracy)
      .Set("test_loss", e.test_loss)
      .Set("examples", e.examples)
      .Set("eval_s", e.eval_s)
      .Set("final", e.final);
  // compare.py takes an eval line's epoch as given, else from the steps.
  if (e.epoch >= 0) line.Set("epoch", e.epoch);
  return line;
}

MetricSinks::MetricSinks(std::string task, MetricsWriter* jsonl,
                         EventFileWriter* events, WorkerMetrics* prometheus)
    : task_(std::move(task)),
      jsonl_(jsonl),
      events_(events),
      prometheus_(prometheus) {}

absl::Status MetricSinks::WriteStep(const StepRecord& r, const StepContext& c) {
  JsonObject line = StepJson(task_, r);
  if (c.sent_bytes >= 0) line.Set("sent_bytes", c.sent_bytes);
  if (c.received_bytes >= 0) line.Set("received_bytes", c.received_bytes);
  if (c.train_examples > 0) line.Set("train_examples", c.train_examples);
  line.Set("unix_time", UnixSeconds());
  ++outcomes_[r.outcome];
  if (events_ != nullptr) RETURN_IF_ERROR(WriteStepScalars(r, c));
  if (prometheus_ != nullptr) {
    prometheus_->Record(r, std::max<int64_t>(c.sent_bytes, 0),
                        std::max<int64_t>(c.received_bytes, 0));
  }
  return jsonl_->Write(line);
}

absl::Status MetricSinks::WriteStepScalars(const StepRecord& r,
                                           const StepContext& c) {
  const double t = UnixSeconds();
  const std::pair<std::string, double> scalars[] = {
      {"train/loss", r.loss},
      {"train/accuracy", r.train_accuracy},
      {"train/images_per_s", r.images_per_s},
      {"step/step_s", r.step_s},
      {"step/input_s", r.input_s},
      {"step/compute_s", r.compute_s},
      {"step/push_s", r.push_s},
      {"step/pull_s", r.pull_s},
      {"step/wait_s", r.wait_s},
      {"train/staleness", static_cast<double>(r.staleness)},
      {"bytes/sent", static_cast<double>(std::max<int64_t>(c.sent_bytes, 0))},
      {"bytes/received",
       static_cast<double>(std::max<int64_t>(c.received_bytes, 0))},
  };
  for (const auto& [tag, value] : scalars) {
    RETURN_IF_ERROR(events_->WriteScalar(tag, r.global_step, value, t));
  }
  for (const auto& [outcome, n] : outcomes_) {
    RETURN_IF_ERROR(events_->WriteScalar(
        absl::StrCat("outcomes/", StepOutcomeName(outcome)), r.global_step,
        static_cast<double>(n), t));
  }
  return events_->Flush();
}

absl::Status MetricSinks::WriteEval(const EvalRecord& e) {
  if (events_ != nullptr) {
    const double t = UnixSeconds();
    RETURN_IF_ERROR(events_->WriteScalar("test/accuracy", e.global_step,
                                         e.test_accuracy, t));
    RETURN_IF_ERROR(
        events_->WriteScalar("test/loss", e.global_step, e.test_loss, t));
    RETURN_IF_ERROR(events_->Flush());
  }
  return jsonl_->Write(EvalJson(task_, e));
}

}  // namespace psgd
