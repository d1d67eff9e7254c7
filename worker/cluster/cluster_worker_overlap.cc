// The cluster worker's overlap (ClusterWorkerOptions::overlap; the helpers
// in worker/cluster/overlap.h): the step's forward on weights still
// arriving, the gradients sent as parts, and what settles the pulls in
// flight. The rest of the loop is in cluster_worker.cc.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/cluster/cluster_worker.h"

namespace psgd {

absl::StatusOr<bool> ClusterWorker::ComputeOverlapped(const Batch& batch,
                                                      StepResult* result) {
  const std::vector<VariableSpec>& vars = model_->variables();
  const bool in_flight = puller_ != nullptr && puller_->in_flight();
  size_t awaited = 0;
  absl::Status pull_failure;
  bool stop = false;
  bool began = false;
  StepHooks hooks;
  hooks.await_weights = [&](int v) -> absl::Status {
    if (!in_flight) return absl::OkStatus();
    absl::Status s = puller_->Await(v);
    // Once every variable is there: the version, before any gradient.
    if (s.ok() && ++awaited == vars.size()) s = JoinGroups();
    pull_failure = s;
    // The pulls may return a later step than the one asked for: at a step
    // to stop at, the forward ends here and nothing is pushed, as the
    // worker without overlap stops before it computes.
    if (s.ok() && awaited == vars.size() && !StopReason(version_).empty()) {
      stop = true;
      return absl::CancelledError("the pulled step is one to stop at");
    }
    return s;
  };
  hooks.gradient_ready = [&](int v) {
    if (!began) {
      sender_->Begin(PushTarget());
      began = true;
    }
    const std::string& name = vars[v].name;
    sender_->Add({name, gradients_.at(name).view()});
  };
  absl::StatusOr<StepResult> r = model_->ComputeGradientsWithHooks(
      ViewsOf(weights_), batch.images.view(), batch.labels, &gradients_, hooks);
  if (stop) return false;  // ComputeAndPush finds the stop in version_
  if (!pull_failure.ok()) {
    spdlog::info(
        "worker {}: the pulls of the variables' groups gave no "
        "common step ({}); pulling the whole model",
        options_.worker_id, pull_failure.ToString());
    if (puller_->in_flight()) puller_->Join().IgnoreError();
    RETURN_IF_ERROR(PullWhole(puller_->wanted()));
    return false;
  }
  RETURN_IF_ERROR(r.status());
  *result = *r;
  return true;
}

absl::Status ClusterWorker::JoinGroups() {
  ASSIGN_OR_RETURN(ps::ModelVersion version, puller_->Join());
  if (options_.sync && GlobalStep(version) != NewestStep(version)) {
    return absl::FailedPreconditionError(
        "the shards are at different steps: line them up");
  }
  version_ = std::move(version);
  return absl::OkStatus();
}

absl::Status ClusterWorker::SettlePulls() {
  if (puller_ == nullptr || !puller_->in_flight()) return absl::OkStatus();
  if (JoinGroups().ok()) return absl::OkStatus();
  return PullWhole(puller_->wanted());
}

absl::Status ClusterWorker::PullWhole(const ps::ModelVersion& wanted) {
  absl::StatusOr<ps::ModelVersion> pulled =
      PullSynced(wanted, options_.step_timeout, /*line_up=*/true);
  if (absl::IsCancelled(pulled.status())) return pulled.status();
  if (!pulled.ok()) {
    return Annotate(pulled.status(),
                    absl::StrCat("pulling the weights for step ",
                                 GlobalStep(wanted), ": "));
  }
  version_ = *std::move(pulled);
  return absl::OkStatus();
}

const ps::ModelVersion& ClusterWorker::AheadVersion() const {
  if (puller_ != nullptr && puller_->in_flight()) return puller_->wanted();
  return version_;
}

}  // namespace psgd
