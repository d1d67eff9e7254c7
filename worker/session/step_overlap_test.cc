// A step with overlap in StepOverlap's order, over in-process shards with
// made-up gradients: the statistics there before the forward, parts from
// the backward and the rest at Finish (a "no gradient" mark leaves its
// variable alone), a step to stop at that pushes nothing, and a failed
// group pull that makes the step one to compute again.
#include "worker/session/step_overlap.h"

#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "common/status_macros.h"
#include "ps/shard/shard.h"
#include "ps/state/placement.h"
#include "ps/testing/fault_injection_client.h"
#include "ps/testing/in_process_client.h"
#include "worker/session/session_test_cluster.h"
#include "worker/session/worker_session.h"

namespace psgd {
namespace {

using State = StepOverlap::State;

// Two shards, sync N = M = workers; parameters "w" (its own pull group) and
// "b", then "stat", which StepOverlap treats as a running statistic.
struct Cluster : SessionTestCluster {
  explicit Cluster(int workers)
      : SessionTestCluster({{"w", {64, 32}, Initializer::Constant(0.5f)},
                            {"b", {8}, Initializer::Constant(0.25f)},
                            {"stat", {2048}, Initializer::Constant(1.0f)}},
                           ps::Mode::kSync, workers) {}
};

SessionOptions Options(int worker) {
  SessionOptions o;
  o.worker_id = worker;
  o.sync = true;
  o.overlap = true;
  o.start_timeout = absl::Seconds(30);
  o.step_timeout = absl::Seconds(30);
  o.ps_unavailable_timeout = absl::Seconds(30);
  return o;
}

// One step as a front end drives it: the forward awaits each parameter,
// the backward hands them over last first; OK with the step's state.
absl::StatusOr<State> Step(StepOverlap* step, WorkerSession* s,
                           std::vector<ps::NamedConstTensorView> g,
                           PushOutcome* pushed) {
  ASSIGN_OR_RETURN(State state, step->Begin());
  for (int v = 0; v < 2 && state == State::kCompute; ++v) {
    ASSIGN_OR_RETURN(state, step->AwaitWeights(v));
  }
  if (state == State::kCompute) {
    ASSIGN_OR_RETURN(state, step->ForwardDone());
  }
  if (state != State::kCompute) return state;
  step->GradientReady(1, g[1]);
  step->GradientReady(0, g[0]);
  ASSIGN_OR_RETURN(*pushed, step->Finish(g));
  RETURN_IF_ERROR(s->PullAfterPush(*pushed));
  return state;
}

TEST_CASE("two workers step together in the overlap's order") {
  Cluster c(2);
  std::vector<std::unique_ptr<WorkerSession>> s;
  for (int w = 0; w < 2; ++w) {
    s.push_back(std::make_unique<WorkerSession>(c.clients[w].get(), c.specs,
                                                c.Buffers(w), Options(w)));
  }
  REQUIRE(s[0]->Initialize(c.Initial()).ok());
  std::vector<absl::Status> errors(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      errors[w] = [&]() -> absl::Status {
        RETURN_IF_ERROR(s[w]->Start());
        StepOverlap step(
            s[w].get(), 2, [] { return false; }, "test");
        for (int i = 0; i < 3; ++i) {
          PushOutcome o;
          ASSIGN_OR_RETURN(State state,
                           Step(&step, s[w].get(), c.Gradients(w, 0.1f), &o));
          if (state != State::kCompute) {
            return absl::InternalError("the step did not compute");
          }
        }
        RETURN_IF_ERROR(s[w]->SettlePulls());
        return s[w]->Leave();
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < 2; ++w) {
    INFO("worker " << w << ": " << errors[w].ToString());
    REQUIRE(errors[w].ok());
    CHECK(GlobalStep(s[w]->version()) == 3);
  }
  for (int i = 0; i < 2; ++i) {
    CHECK(c.Counters(i).applied == 3);
    CHECK(c.Counters(i).aggregated == 3);
  }
  for (int v = 0; v < 3; ++v) {
    CHECK(c.weights[0][v].span()[0] == c.weights[1][v].span()[0]);
    CHECK(c.weights[0][v].span()[0] != c.initial[v].span()[0]);
  }
}

TEST_CASE(
    "the statistics come before the forward; parts not sent go at "
    "Finish") {
  Cluster c(1);
  WorkerSession s(c.clients[0].get(), c.specs, c.Buffers(0), Options(0));
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(s.Start().ok());
  StepOverlap step(
      &s, 2, [] { return false; }, "test");
  // Step 1: only "w" from the backward; "b" has no gradient (frozen):
  // Finish sends the mark and the statistic.
  REQUIRE(step.Begin().value() == State::kCompute);
  CHECK_FALSE(step.in_flight());  // the first weights are whole
  REQUIRE(step.ForwardDone().value() == State::kCompute);
  std::vector<ps::NamedConstTensorView> g = c.Gradients(0, 0.1f);
  step.GradientReady(0, g[0]);
  g[1] = {"b", ConstTensorView(ps::NoGradient(), g[1].view.shape())};
  absl::StatusOr<PushOutcome> o = step.Finish(g);
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  CHECK(o->outcome == StepOutcome::kApplied);
  REQUIRE(s.PullAfterPush(*o).ok());
  REQUIRE(s.pulls_in_flight());
  // Step 2: Begin awaits the statistic's group before the forward.
  REQUIRE(step.Begin().value() == State::kCompute);
  CHECK(step.in_flight());
  CHECK(c.weights[0][2].span()[0] != 1.0f);
  CHECK(s.pulls_in_flight());  // the parameters are still to come
  REQUIRE(step.AwaitWeights(1).value() == State::kCompute);
  REQUIRE(step.ForwardDone().value() == State::kCompute);
  CHECK_FALSE(s.pulls_in_flight());
  CHECK(GlobalStep(s.version()) == 1);
  CHECK(c.weights[0][1].span()[0] == 0.25f);  // "b" left alone
  CHECK(c.weights[0][0].span()[0] != 0.5f);
  // Out of range, and the statistic is not a parameter to await.
  CHECK(absl::IsInvalidArgument(step.AwaitWeights(2).status()));
  CHECK(absl::IsInvalidArgument(step.AwaitWeights(-1).status()));
}

TEST_CASE("a step to stop at pushes nothing") {
  Cluster c(1);
  WorkerSession s(c.clients[0].get(), c.specs, c.Buffers(0), Options(0));
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(s.Start().ok());
  // max_steps = 2: the weights of step 2 are the last.
  StepOverlap step(
      &s, 2, [&s] { return GlobalStep(s.version()) >= 2; }, "test");
  std::vector<State> states;
  for (int i = 0; i < 3; ++i) {
    PushOutcome o;
    absl::StatusOr<State> state = Step(&step, &s, c.Gradients(0, 0.1f), &o);
    INFO(state.status().ToString());
    REQUIRE(state.ok());
    states.push_back(*state);
    if (*state != State::kCompute) break;
  }
  CHECK(states ==
        std::vector<State>{State::kCompute, State::kCompute, State::kStop});
  CHECK(absl::IsFailedPrecondition(step.Finish(c.Gradients(0, 0.1f)).status()));
  CHECK(c.Counters(0).applied == 2);
  CHECK(c.Counters(1).applied == 2);
}

TEST_CASE("a failed group pull: the whole model again, the step redone") {
  Cluster c(1);
  ps::FaultInjector network(/*seed=*/3);
  ps::FaultInjectionPsClient faulty(c.clients[0].get(), &network, 0);
  WorkerSession s(&faulty, c.specs, c.Buffers(0), Options(0));
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(s.Start().ok());
  StepOverlap step(
      &s, 2, [] { return false; }, "test");
  // Step 1, pushed; then the next pull of a group is lost: the rule comes
  // before the pulls after the push start.
  REQUIRE(step.Begin().value() == State::kCompute);
  REQUIRE(step.ForwardDone().value() == State::kCompute);
  absl::StatusOr<PushOutcome> pushed = step.Finish(c.Gradients(0, 0.1f));
  REQUIRE(pushed.ok());
  ps::FaultRule rule;
  rule.call = ps::CallKind::kPull;
  rule.action = ps::FaultAction::kDropRequest;
  faulty.AddRule(rule);
  REQUIRE(s.PullAfterPush(*pushed).ok());
  absl::StatusOr<State> state = step.Begin();
  for (int v = 0; v < 2 && state.ok() && *state == State::kCompute; ++v) {
    state = step.AwaitWeights(v);
  }
  if (state.ok() && *state == State::kCompute) state = step.ForwardDone();
  INFO(state.status().ToString());
  REQUIRE(state.ok());
  CHECK(*state == State::kRedo);
  // Nothing goes from this forward; the weights are whole, of step 1.
  step.GradientReady(0, c.Gradients(0, 0.1f)[0]);
  CHECK(absl::IsFailedPrecondition(step.Finish(c.Gradients(0, 0.1f)).status()));
  CHECK_FALSE(s.pulls_in_flight());
  CHECK(GlobalStep(s.version()) == 1);
  CHECK(c.Counters(0).applied == 1);
  // Computed again without parts, the step goes through.
  absl::StatusOr<PushOutcome> again = s.Push(c.Gradients(0, 0.1f));
  REQUIRE(again.ok());
  CHECK(again->outcome == StepOutcome::kApplied);
  CHECK(c.Counters(0).applied == 2);
}

}  // namespace
}  // namespace psgd
