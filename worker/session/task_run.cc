#include "worker/session/task_run.h"

#include <utility>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/session/leave_request.h"

namespace psgd {

const char kServersShutDown[] = "the servers shut down (training is over)";

TaskRun::TaskRun(TaskRunOptions options, RunCallbacks callbacks)
    : options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      stragglers_(options_.stragglers),
      progress_(options_.log_every, options_.ends) {}

void TaskRun::InjectAfterCompute(absl::Duration compute) {
  if (!stragglers_.enabled()) return;
  const absl::Duration d = stragglers_.AfterCompute(compute).total();
  absl::SleepFor(d);
  injected_ += d;
}

void TaskRun::InjectTransfer() {
  const absl::Duration d = stragglers_.transfer();
  if (d <= absl::ZeroDuration()) return;
  absl::SleepFor(d);
  injected_ += d;
}

absl::Status TaskRun::Start(
    std::unique_ptr<WorkerSession> session,
    absl::Span<const ps::NamedConstTensorView> initial) {
  start_ = absl::Now();
  session_ = std::move(session);
  if (options_.chief) {
    chief_ = std::make_unique<Chief>(session_.get(), options_.chief_options);
    RETURN_IF_ERROR(session_->Initialize(initial));
  }
  absl::Status started = session_->Start();
  // Workers that failed to take part (CheckWorkerFailures): the chief ends
  // the job.
  if (chief_ != nullptr && absl::IsFailedPrecondition(started)) {
    return chief_->EndJob(started);
  }
  return started;
}

std::string TaskRun::StopReason(const ps::ModelVersion& version) const {
  if (LeaveRequested()) return kLeaveRequested;
  return psgd::StopReason(options_.ends, GlobalStep(version),
                          absl::Now() - start_);
}

absl::StatusOr<TaskRun::Next> TaskRun::BeforeStep() {
  Next next;
  const ps::ModelVersion& ahead = session_->ahead_version();
  if (!StopReason(ahead).empty() ||
      (chief_ != nullptr && chief_->EvalDue(ahead))) {
    absl::Status settled = session_->SettlePulls();
    if (absl::IsCancelled(settled)) {
      next.stop = kServersShutDown;
      return next;
    }
    RETURN_IF_ERROR(settled);
  }
  next.stop = StopReason(session_->version());
  if (!next.stop.empty()) return next;
  RETURN_IF_ERROR(ChiefDuties());
  next.evaluate = EvalDue();
  return next;
}

absl::Status TaskRun::ChiefDuties() {
  if (chief_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(chief_->CheckWorkers());
  chief_->MaybeRequestCheckpoint(session_->ahead_version());
  return absl::OkStatus();
}

bool TaskRun::EvalDue() const {
  return chief_ != nullptr && chief_->EvalDue(session_->version());
}

void TaskRun::Evaluated(int64_t global_step) {
  if (chief_ != nullptr) chief_->Evaluated(global_step);
}

absl::Status TaskRun::RecordStep(StepRecord* record, const StepTimings& timings,
                                 int64_t batches_done) {
  record->local_step = ++result_.local_steps;
  timings.Fill(session_->version().server_wait, start_, record);
  // The rate of the update that made the weights pulled after this step
  // (sync: the step this worker pushed for), as the servers applied it.
  if (record->learning_rate < 0 && session_->version().learning_rate > 0) {
    record->learning_rate = session_->version().learning_rate;
  }
  record->injected_s = absl::ToDoubleSeconds(injected_);
  record->emulated = options_.emulated;
  injected_ = absl::ZeroDuration();
  result_.outcomes[record->outcome]++;
  step_seconds_ += record->step_s;
  images_ += record->batch_size;
  if (callbacks_.on_step) RETURN_IF_ERROR(callbacks_.on_step(*record));
  progress_.Add(*record, GlobalStep(session_->version()), batches_done);
  return absl::OkStatus();
}

absl::Status TaskRun::RecordEval(EvalRecord record) {
  record.wall_time_s = absl::ToDoubleSeconds(absl::Now() - start_);
  spdlog::info("step {}: test accuracy {:.4f}, test loss {:.4f} ({} images{})",
               record.global_step, record.test_accuracy, record.test_loss,
               record.examples, record.final ? ", final" : "");
  result_.evals.push_back(record);
  if (callbacks_.on_eval) return callbacks_.on_eval(record);
  return absl::OkStatus();
}

absl::Status TaskRun::Leave(bool wait_for_others) {
  left_ = true;
  if (chief_ != nullptr && chief_->ended_job()) {
    // The chief shut the servers down itself (workers failed): a Leave
    // would find them gone and wait for them, and the other workers for
    // the summary that ends their waits (Recovery's job end marker).
    servers_gone_ = true;
    result_.final_global_step = GlobalStep(session_->version());
    return absl::OkStatus();
  }
  absl::Status left = session_->Leave();
  result_.final_global_step = GlobalStep(session_->version());
  servers_gone_ = absl::IsCancelled(left);
  if (!left.ok() && !servers_gone_) return left;
  if (chief_ == nullptr || servers_gone_) return absl::OkStatus();
  if (wait_for_others) {
    RETURN_IF_ERROR(chief_->AwaitOthersLeft());
  } else {
    spdlog::warn("{} ends the job without waiting for the other workers",
                 options_.name);
  }
  // The final weights, without waiting for a step.
  absl::StatusOr<ps::ModelVersion> latest = session_->PullLatest();
  if (absl::IsCancelled(latest.status())) {
    // The servers shut down meanwhile, or the worker stopped waiting for
    // them (a signal): as when the Leave found them gone.
    servers_gone_ = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(latest.status());
  latest_ = *std::move(latest);
  result_.final_global_step = GlobalStep(latest_);
  return absl::OkStatus();
}

absl::Status TaskRun::Finish(std::string end_reason) {
  if (!left_) return absl::FailedPreconditionError("Finish comes after Leave");
  result_.end_reason = std::move(end_reason);
  spdlog::info("{} stops after {} steps: {}", options_.name,
               result_.local_steps, result_.end_reason);
  if (chief_ != nullptr && !servers_gone_) {
    ASSIGN_OR_RETURN(result_.server_status, chief_->ShutDownServers(latest_));
  }
  result_.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  result_.images_per_s = step_seconds_ > 0 ? images_ / step_seconds_ : 0.0;
  result_.recoveries = session_->recovery().recoveries();
  return absl::OkStatus();
}

}  // namespace psgd
