// One training step with overlap (the config's wire { overlap: true };
// docs/CLUSTER.md, "Overlap"), in the one order that every worker front end
// drives: the C++ worker from its model's hooks
// (worker/cluster/cluster_worker.cc) and psgd.torch from its module's hooks
// (worker/session/external_worker.h). The front ends only say when their
// forward reaches a variable and when their backward has a gradient:
//
//   Begin()             before the forward: whether the step's weights are
//                       still arriving (the session's group pulls); the
//                       running statistics (the session's variables after
//                       the parameters) are awaited first, as a forward
//                       writes its batch's statistics into the buffers that
//                       psgd.torch's pulls fill;
//   AwaitWeights(v)     before parameter v's first use in the forward;
//   ForwardDone()       after the forward: the parameters it did not use;
//   GradientReady(v, g) as the backward produces parameter v's gradient:
//                       sent at once as a part of the push;
//   Finish(gradients)   after the backward: the parameters the backward did
//                       not reach (a "no gradient" mark or the gradient)
//                       and the batch statistics as parts, last; then the
//                       push, whole (WorkerSession::FinishParts).
//
// Once every variable is there the step's version is known (the groups
// joined). Two things may then end the step before anything is pushed:
//   kStop: the weights are of a step to stop at (max_steps, the time
//          budget): nothing of this batch is pushed, as a worker without
//          overlap stops before it computes; the forward may end at once.
//   kRedo: a group's pull failed or the shards moved between the groups'
//          pulls: the whole model has been pulled again, and the step is to
//          be computed again, without overlap (its forward ran on weights
//          of two steps).
//
// Thread-safety: one thread drives it; GradientReady may come from another
// thread (autograd's) while the driving thread waits in the backward, one
// call at a time.
#ifndef PSGD_WORKER_SESSION_STEP_OVERLAP_H_
#define PSGD_WORKER_SESSION_STEP_OVERLAP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/client/ps_client.h"
#include "worker/session/worker_session.h"

namespace psgd {

class StepOverlap {
 public:
  enum class State { kCompute, kStop, kRedo };

  // `session` (not owned) must have overlap on; its first `parameters`
  // variables are trained parameters, the rest running statistics.
  // `stop_due`: whether the session's version is one to stop at. `who`
  // names the worker in the log line of a redo.
  StepOverlap(WorkerSession* session, int parameters,
              std::function<bool()> stop_due, std::string who);

  // A new step, before its forward. Errors: the session's (CANCELLED once
  // the servers shut down); a failed group is a redo, not an error.
  absl::StatusOr<State> Begin();
  // Before parameter v's first use (again: nothing). INVALID_ARGUMENT for
  // v out of range.
  absl::StatusOr<State> AwaitWeights(int v);
  // After the forward.
  absl::StatusOr<State> ForwardDone();
  State state() const { return state_; }
  // Whether Begin found the step's weights still arriving.
  bool in_flight() const { return in_flight_; }

  // Parameter v's gradient, which must stay unchanged until Finish: sent as
  // a part (once per variable; ignored unless the step computes). Awaits
  // what the forward did not, first, when ForwardDone was not called.
  void GradientReady(int v, ps::NamedConstTensorView gradient);
  // Every session variable's gradient (batch statistics for the running
  // statistics), in the session's order: those not yet sent go as parts,
  // then the push is finished. FAILED_PRECONDITION unless the step
  // computes.
  absl::StatusOr<PushOutcome> Finish(
      absl::Span<const ps::NamedConstTensorView> gradients);

 private:
  // Awaits variable v once; then, when every variable is there, whether
  // the step stops. A failed group: the whole model pulled, kRedo.
  absl::Status Await(int v);

  WorkerSession* const session_;  // Not owned.
  const int parameters_;
  const std::function<bool()> stop_due_;
  const std::string who_;
  State state_ = State::kCompute;
  bool in_flight_ = false;
  bool forward_done_ = false;
  absl::Status error_;  // an await's, kept for Finish
  std::vector<bool> awaited_;
  std::vector<bool> sent_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_STEP_OVERLAP_H_
