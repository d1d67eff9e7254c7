#include "worker/cluster/overlapped_step.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace psgd {

absl::StatusOr<bool> ComputeOverlapped(const OverlapStep& step,
                                       const Batch& batch, StepResult* result) {
  WorkerSession* const session = step.session;
  const std::vector<VariableSpec>& vars = step.model->variables();
  const int num_vars = static_cast<int>(vars.size());
  const bool in_flight = session->pulls_in_flight();
  absl::Status pull_failure;
  bool stop = false;
  int awaited = 0;
  StepHooks hooks;
  hooks.await_weights = [&](int v) -> absl::Status {
    if (!in_flight) return absl::OkStatus();
    pull_failure = session->AwaitWeights(v);
    // The running statistics (the session's variables after the model's)
    // come with the model's last variable: the step's version is complete
    // only with them.
    if (++awaited == num_vars && pull_failure.ok()) {
      pull_failure = step.statistics->Await(session, num_vars);
    }
    // Once every variable is there (the groups joined), the pulls may have
    // returned a later step than the one asked for: at a step to stop at,
    // the forward ends here and nothing is pushed, as the worker without
    // overlap stops before it computes.
    if (pull_failure.ok() && !session->pulls_in_flight() && step.stop_due()) {
      stop = true;
      return absl::CancelledError("the pulled step is one to stop at");
    }
    return pull_failure;
  };
  hooks.gradient_ready = [&](int v) {
    const std::string& name = vars[v].name;
    session->AddPart({name, step.gradients->at(name).view()});
  };
  absl::StatusOr<StepResult> r = step.model->ComputeGradientsWithHooks(
      ViewsOf(*step.weights), batch.images.view(), batch.labels, step.gradients,
      hooks);
  if (stop) return false;  // the caller finds the stop in the version
  if (!pull_failure.ok()) {
    spdlog::info(
        "worker {}: the pulls of the variables' groups gave no common step "
        "({}); pulling the whole model",
        step.worker_id, pull_failure.ToString());
    RETURN_IF_ERROR(session->PullWholeAfterGroups());
    return false;
  }
  RETURN_IF_ERROR(r.status());
  RETURN_IF_ERROR(step.statistics->TakeBatch());
  step.statistics->AddParts(session);
  *result = *r;
  return true;
}

}  // namespace psgd
