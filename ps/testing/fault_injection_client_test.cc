// The fault-injection wrapper over in-process shards (no sockets, so it runs
// under ThreadSanitizer), and that the servers' rules make each fault
// harmless: a duplicated push is applied once, a push whose reply was lost
// is refused when sent again, a push overtaken by the step it was for is
// dropped (surplus, or stale), a cut-off worker's calls fail or time out
// and go through again when the link comes back.
#include "ps/testing/fault_injection_client.h"

#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "ps/shard/shard.h"
#include "ps/state/placement.h"
#include "ps/testing/in_process_client.h"

namespace psgd {
namespace ps {
namespace {

const std::vector<VariableSpec>& Model() {
  static const auto* specs =
      new std::vector<VariableSpec>{{"w", {4, 3}, {}}, {"b", {3}, {}}};
  return *specs;
}

// Values of the model's variables; `g` scales a fixed pattern.
struct Values {
  std::vector<float> w = std::vector<float>(12), b = std::vector<float>(3);
  static Values Of(float g) {
    Values v;
    for (int i = 0; i < 12; ++i) v.w[i] = g * (0.25f * i - 1.0f);
    for (int i = 0; i < 3; ++i) v.b[i] = g * (0.5f - 0.25f * i);
    return v;
  }
  std::vector<NamedConstTensorView> Const() const {
    return {{"w", ConstTensorView(w.data(), {4, 3})},
            {"b", ConstTensorView(b.data(), {3})}};
  }
  std::vector<NamedTensorView> Mutable() {
    return {{"w", TensorView(w.data(), {4, 3})},
            {"b", TensorView(b.data(), {3})}};
  }
};

// Two shards of a sync cluster of M workers aggregating N, initialised.
struct Cluster {
  std::vector<std::unique_ptr<ParameterShard>> shards;
  std::vector<ParameterShard*> pointers;
  Placement placement;

  Cluster(int n, int m) {
    for (int i = 0; i < 2; ++i) {
      ShardOptions o;
      o.shard_index = i;
      o.num_shards = 2;
      o.replicas_to_aggregate = n;
      o.total_num_replicas = m;
      shards.push_back(*ParameterShard::Create(o));
      pointers.push_back(shards.back().get());
    }
    placement = *PlaceVariables(Model(), 2, 1024);
    REQUIRE(Client(-1)->Initialize(Values::Of(1.0f).Const()).ok());
    for (int w = 0; w < m; ++w) REQUIRE(Client(w)->Join().ok());
  }
  std::unique_ptr<PsClient> Client(int worker) {
    return *InProcessPsClient::Create(pointers, placement, "psgd", worker);
  }
  // Once shard 0's decisions have reached shard 1 (a pull of any step
  // does not wait for them).
  Values Weights() {
    REQUIRE(
        shards[0]->AwaitDecisionsDelivered(absl::Now() + absl::Seconds(30)));
    Values v;
    REQUIRE(Client(-1)
                ->Pull(ModelVersion::AtLeast(2, 0), absl::Now(), v.Mutable())
                .ok());
    return v;
  }
  // Shard 0's: it decides every push for both shards.
  int64_t Counter(int64_t PushCounters::*c) const {
    return shards[0]->Status().counters.*c;
  }
};

ModelVersion Step(int64_t s) { return ModelVersion::AtLeast(2, s); }

TEST_CASE("a duplicated push is applied once") {
  Cluster faulty(2, 2), clean(2, 2);
  FaultInjector network(1);
  auto inner = faulty.Client(0);
  FaultInjectionPsClient w0(inner.get(), &network, 0);
  w0.AddRule({CallKind::kPush, FaultAction::kDuplicate});
  auto r = w0.Push(Step(0), Values::Of(0.5f).Const());
  REQUIRE(r.ok());
  CHECK(r->shards[0].outcome == PushOutcome::kAggregated);
  FaultStats s = w0.stats();
  CHECK(s.duplicated == 1);
  CHECK(s.delivered_pushes == 2);
  REQUIRE(s.second_sends.size() == 1);
  CHECK(absl::IsFailedPrecondition(s.second_sends[0]));
  CHECK_THAT(std::string(s.second_sends[0].message()),
             Catch::Contains("already pushed for step 0"));
  REQUIRE(faulty.Client(1)->Push(Step(0), Values::Of(-2.0f).Const()).ok());

  REQUIRE(clean.Client(0)->Push(Step(0), Values::Of(0.5f).Const()).ok());
  REQUIRE(clean.Client(1)->Push(Step(0), Values::Of(-2.0f).Const()).ok());
  CHECK(faulty.Weights().w == clean.Weights().w);
  CHECK(faulty.Weights().b == clean.Weights().b);
  CHECK(faulty.Counter(&PushCounters::applied) == 1);  // one step
  CHECK(faulty.Counter(&PushCounters::refused) == 1);  // the copy
}

TEST_CASE("a lost reply: the push was applied; sent again it is refused") {
  Cluster c(2, 2);
  FaultInjector network(1);
  auto inner = c.Client(0);
  FaultInjectionPsClient w0(inner.get(), &network, 0);
  w0.AddRule({CallKind::kPush, FaultAction::kDropReply});
  auto lost = w0.Push(Step(0), Values::Of(1.0f).Const());
  CHECK(absl::IsUnavailable(lost.status()));
  CHECK_THAT(std::string(lost.status().message()),
             Catch::Contains("reply was lost"));
  CHECK(c.Counter(&PushCounters::aggregated) == 1);
  auto again = w0.Push(Step(0), Values::Of(1.0f).Const());
  CHECK(absl::IsFailedPrecondition(again.status()));
  CHECK(c.Counter(&PushCounters::aggregated) == 1);
  CHECK(w0.stats().dropped_replies == 1);
}

TEST_CASE("a dropped request never reaches the servers; rules count calls") {
  Cluster c(2, 2);
  FaultInjector network(1);
  auto inner = c.Client(0);
  FaultInjectionPsClient w0(inner.get(), &network, 0);
  // The second push is dropped, once; a delay is only a delay.
  w0.AddRule({CallKind::kPush, FaultAction::kDropRequest, 1.0, /*skip=*/1});
  w0.AddRule(
      {CallKind::kPull, FaultAction::kDelay, 1.0, 0, 1, absl::Milliseconds(1)});
  REQUIRE(w0.Push(Step(0), Values::Of(1.0f).Const()).ok());
  REQUIRE(c.Client(1)->Push(Step(0), Values::Of(1.0f).Const()).ok());
  Values v;
  REQUIRE(w0.Pull(Step(1), absl::Now() + absl::Seconds(10), v.Mutable()).ok());
  auto dropped = w0.Push(Step(1), Values::Of(1.0f).Const());
  CHECK(absl::IsUnavailable(dropped.status()));
  CHECK(c.Counter(&PushCounters::aggregated) == 1);  // step 0's only
  REQUIRE(w0.Push(Step(1), Values::Of(1.0f).Const()).ok());
  CHECK(c.Counter(&PushCounters::aggregated) == 2);
  const FaultStats s = w0.stats();
  CHECK(s.dropped_requests == 1);
  CHECK(s.delayed == 1);
  CHECK(s.delivered_pushes == 2);
}

// Joins a test's helper thread however the test case ends (a failed REQUIRE
// throws past it).
class JoinOnExit {
 public:
  explicit JoinOnExit(std::thread* t) : t_(t) {}
  ~JoinOnExit() {
    if (t_->joinable()) t_->join();
  }

 private:
  std::thread* const t_;
};

// How long a test waits for a fault to be in place: far more than it takes,
// yet a test whose fault never comes fails in seconds.
constexpr absl::Duration kFaultInPlace = absl::Seconds(10);

TEST_CASE("a push overtaken by its step is dropped: surplus, then stale") {
  for (int after : {2, 4}) {
    INFO("held until " << after << " other pushes went through");
    Cluster c(2, 3);  // N=2 of M=3: worker 2 is the backup
    // A hold that is never overtaken ends on this timeout, counted in
    // reorder_timeouts: a regression fails in seconds, not 30.
    FaultInjector network(1, /*hold_timeout=*/absl::Seconds(5));
    auto inner0 = c.Client(0), inner1 = c.Client(1), inner2 = c.Client(2);
    FaultInjectionPsClient w0(inner0.get(), &network, 0);
    FaultInjectionPsClient w1(inner1.get(), &network, 1);
    FaultInjectionPsClient w2(inner2.get(), &network, 2);
    w2.AddRule({CallKind::kPush, FaultAction::kReorder, 1.0, 0, 1,
                absl::ZeroDuration(), after});
    absl::StatusOr<PushResult> late;
    std::thread held(
        [&] { late = w2.Push(Step(0), Values::Of(9.0f).Const()); });
    JoinOnExit join_held(&held);
    // The others push only once worker 2's push is held (its target taken),
    // so they overtake it: it reaches the servers after them.
    REQUIRE(network.AwaitHeld(1, kFaultInPlace));
    CHECK(c.Counter(&PushCounters::aggregated) == 0);  // not sent yet
    for (int64_t s = 0; s < after / 2; ++s) {
      REQUIRE(w0.Push(Step(s), Values::Of(1.0f).Const()).ok());
      REQUIRE(w1.Push(Step(s), Values::Of(2.0f).Const()).ok());
      // As a worker's pull would: both shards at the next step.
      REQUIRE(c.shards[0]->AwaitDecisionsDelivered(absl::Now() +
                                                   absl::Seconds(30)));
    }
    held.join();
    REQUIRE(late.ok());
    CHECK(late->shards[0].outcome == (after == 2 ? PushOutcome::kDroppedSurplus
                                                 : PushOutcome::kDroppedStale));
    CHECK(late->shards[1].outcome == late->shards[0].outcome);
    const FaultStats s = w2.stats();
    CHECK(s.reordered == 1);
    CHECK(s.reorder_timeouts == 0);  // overtaken, not sent on the timeout
    CHECK(s.delivered_pushes == 1);
    CHECK(c.shards[0]->Status().step == after / 2);
    // The late gradient changed nothing: a cluster that never saw it agrees.
    Cluster clean(2, 3);
    for (int64_t s = 0; s < after / 2; ++s) {
      REQUIRE(clean.Client(0)->Push(Step(s), Values::Of(1.0f).Const()).ok());
      REQUIRE(clean.Client(1)->Push(Step(s), Values::Of(2.0f).Const()).ok());
      REQUIRE(clean.shards[0]->AwaitDecisionsDelivered(absl::Now() +
                                                       absl::Seconds(30)));
    }
    CHECK(c.Weights().w == clean.Weights().w);
  }
}

TEST_CASE("a push held at the gate goes when it opens") {
  Cluster c(1, 1);
  FaultInjector network(1, /*hold_timeout=*/absl::Seconds(30));
  auto inner = c.Client(0);
  FaultInjectionPsClient w0(inner.get(), &network, 0);
  w0.AddRule({CallKind::kPush, FaultAction::kGate});
  network.CloseGate();
  absl::StatusOr<PushResult> pushed;
  std::thread t([&] { pushed = w0.Push(Step(0), Values::Of(1.0f).Const()); });
  JoinOnExit join_t(&t);
  // The push is at the closed gate: it has not reached the servers.
  REQUIRE(network.AwaitAtGate(1, kFaultInPlace));
  CHECK(c.shards[0]->Status().step == 0);
  CHECK(c.Counter(&PushCounters::applied) == 0);
  CHECK(w0.stats().delivered_pushes == 0);
  network.OpenGate();
  t.join();
  REQUIRE(pushed.ok());
  CHECK(c.shards[0]->Status().step == 1);
  CHECK(network.at_gate() == 0);
  const FaultStats s = w0.stats();
  CHECK(s.gated == 1);
  CHECK(s.gate_timeouts == 0);  // it went when the gate opened
}

TEST_CASE("a cut-off worker's calls fail or time out, until the link is back") {
  Cluster c(1, 1);
  FaultInjector network(1);
  auto inner = c.Client(0);
  FaultInjectionPsClient w0(inner.get(), &network, 0, absl::Milliseconds(50));
  w0.SetCut(CutMode::kFail);
  absl::Status s = w0.Status().status();
  CHECK(absl::IsUnavailable(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("worker 0 is cut off"));
  w0.SetCut(CutMode::kHang);
  Values v;
  CHECK(absl::IsDeadlineExceeded(
      w0.Pull(Step(0), absl::Now() + absl::Milliseconds(20), v.Mutable())
          .status()));
  CHECK(absl::IsDeadlineExceeded(w0.Join()));  // the wrapper's call timeout
  // The link comes back while a call hangs: that call is lost.
  absl::Status hung;
  std::thread t([&] { hung = w0.Leave(); });
  w0.SetCut(CutMode::kNone);
  t.join();
  CHECK((hung.ok() || absl::IsUnavailable(hung)));
  CHECK(w0.Status().ok());
  CHECK(w0.stats().cut_calls >= 3);
  // kCutOff cuts from the matching call on.
  w0.AddRule({CallKind::kPush, FaultAction::kCutOff});
  CHECK(
      absl::IsUnavailable(w0.Push(Step(0), Values::Of(1.0f).Const()).status()));
  CHECK(absl::IsUnavailable(w0.Status().status()));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
