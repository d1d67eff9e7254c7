#include "worker/session/step_overlap.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace psgd {

StepOverlap::StepOverlap(WorkerSession* session, int parameters,
                         std::function<bool()> stop_due, std::string who)
    : session_(session),
      parameters_(parameters),
      stop_due_(std::move(stop_due)),
      who_(std::move(who)) {}

absl::StatusOr<StepOverlap::State> StepOverlap::Begin() {
  const size_t n = session_->variables().size();
  state_ = State::kCompute;
  in_flight_ = session_->pulls_in_flight();
  forward_done_ = false;
  error_ = absl::OkStatus();
  awaited_.assign(n, false);
  sent_.assign(n, false);
  for (size_t v = parameters_; v < n && state_ == State::kCompute; ++v) {
    RETURN_IF_ERROR(Await(static_cast<int>(v)));
  }
  return state_;
}

absl::Status StepOverlap::Await(int v) {
  if (!in_flight_ || awaited_[v] || state_ != State::kCompute) {
    return absl::OkStatus();
  }
  awaited_[v] = true;
  absl::Status s = session_->AwaitWeights(v);
  if (absl::IsCancelled(s)) return error_ = s;  // the servers shut down
  if (!s.ok()) {
    spdlog::info(
        "{}: the pulls of the variables' groups gave no common step ({}); "
        "pulling the whole model and computing the step again",
        who_, s.ToString());
    error_ = session_->PullWholeAfterGroups();
    RETURN_IF_ERROR(error_);
    state_ = stop_due_() ? State::kStop : State::kRedo;
    return absl::OkStatus();
  }
  // Every variable there (the groups joined): the version is the step's.
  if (!session_->pulls_in_flight() && stop_due_()) state_ = State::kStop;
  return absl::OkStatus();
}

absl::StatusOr<StepOverlap::State> StepOverlap::AwaitWeights(int v) {
  if (v < 0 || v >= parameters_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter index ", v, " out of range [0, ", parameters_, ")"));
  }
  RETURN_IF_ERROR(Await(v));
  return state_;
}

absl::StatusOr<StepOverlap::State> StepOverlap::ForwardDone() {
  forward_done_ = true;
  for (int v = 0; v < parameters_ && state_ == State::kCompute; ++v) {
    RETURN_IF_ERROR(Await(v));
  }
  return state_;
}

void StepOverlap::GradientReady(int v, ps::NamedConstTensorView gradient) {
  // The push's version is known only once every variable is there.
  if (!forward_done_ && !ForwardDone().ok()) return;
  if (state_ != State::kCompute || v < 0 || v >= parameters_ || sent_[v]) {
    return;
  }
  sent_[v] = true;
  session_->AddPart(std::move(gradient));
}

absl::StatusOr<PushOutcome> StepOverlap::Finish(
    absl::Span<const ps::NamedConstTensorView> gradients) {
  if (!forward_done_) RETURN_IF_ERROR(ForwardDone().status());
  RETURN_IF_ERROR(error_);
  if (state_ != State::kCompute) {
    return absl::FailedPreconditionError(
        state_ == State::kStop
            ? "the step's weights are of a step to stop at: nothing to push"
            : "the step's forward ran on weights of two steps: compute it "
              "again");
  }
  if (gradients.size() != sent_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        gradients.size(), " gradients for ", sent_.size(), " variables"));
  }
  for (size_t v = 0; v < gradients.size(); ++v) {
    if (sent_[v]) continue;
    sent_[v] = true;
    session_->AddPart(gradients[v]);
  }
  return session_->FinishParts(gradients);
}

}  // namespace psgd
