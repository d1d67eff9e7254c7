// A PsClient that wraps another and injects the faults of a network, as
// leveldb's EnvWrapper wraps an Env: it drops calls (before they reach the
// servers, or their replies after), delays them, sends pushes twice, holds a
// call until others have overtaken it (reordering), or cuts the worker off
// altogether. For tests (ps/testing/fault_injection_client_test.cc, the worker
// loop's tests): the servers' rules must make each fault harmless, e.g. a push
// sent twice is applied once (a worker pushes once per step) and a push
// overtaken by a step is dropped as stale.
//
//   FaultInjector network(/*seed=*/7);           // shared by the workers
//   FaultInjectionPsClient client(inner.get(), &network, /*worker_id=*/2);
//   client.AddRule({CallKind::kPush, FaultAction::kDropReply});  // once
//   client.SetCut(CutMode::kHang);                // and later kNone
//
// A call matches the first rule of its kind that still applies (`skip`
// matching calls pass first, then it applies `times` times, each with
// `probability`, drawn from the injector's seeded generator).
//
// Thread-safety: the wrapper's calls are as thread-safe as the wrapped
// client's; AddRule, SetCut and stats() may be called from any thread
// (tests change the faults while the worker runs). The injector is
// thread-safe. Neither owns the other or the wrapped client.
#ifndef PSGD_PS_TESTING_FAULT_INJECTION_CLIENT_H_
#define PSGD_PS_TESTING_FAULT_INJECTION_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "ps/client/ps_client.h"

namespace psgd {
namespace ps {

enum class CallKind {
  kAny,
  kInitialize,
  kJoin,
  kLeave,
  kPull,
  kPush,
  kStatus,
  kShutdown,
  kRollback,
  kCheckpoint,
  kLeaseData,
};
absl::string_view CallKindName(CallKind kind);

enum class FaultAction {
  // UNAVAILABLE at once; the servers never see the call.
  kDropRequest,
  // The servers handle the call, but its reply is lost: UNAVAILABLE.
  kDropReply,
  // The call waits `delay`, then goes.
  kDelay,
  // Sent twice; the caller gets the first reply (the second's status is in
  // stats().second_sends).
  kDuplicate,
  // Held until `after` other calls of its kind have gone through the
  // injector (from any wrapper), then sent: a message overtaken by later
  // ones. Bounded by the injector's hold timeout.
  kReorder,
  // Held while the injector's gate is closed (FaultInjector::CloseGate),
  // then sent. Bounded by the hold timeout.
  kGate,
  // Cuts the worker off from this call on (SetCut(CutMode::kFail)).
  kCutOff,
};

struct FaultRule {
  CallKind call = CallKind::kAny;
  FaultAction action = FaultAction::kDropRequest;
  double probability = 1.0;
  int64_t skip = 0;   // matching calls let through before it applies
  int64_t times = 1;  // how often it applies; -1: always
  absl::Duration delay = absl::ZeroDuration();  // kDelay
  int after = 1;                                // kReorder
};

// The "network" the wrappers of one test share: the random draws, the
// calls that went through (for kReorder) and a gate (for kGate).
class FaultInjector {
 public:
  explicit FaultInjector(uint64_t seed,
                         absl::Duration hold_timeout = absl::Seconds(30))
      : hold_timeout_(hold_timeout), random_(seed) {}

  // True with probability p.
  bool Draw(double p);

  // Counts a call of `kind` that reached the wrapped client.
  void Delivered(CallKind kind);
  // Waits until `after` more calls of `kind` than now have been delivered,
  // or the hold timeout; false on the timeout. The call counts in held()
  // from the moment its target is taken.
  bool AwaitOthers(CallKind kind, int after);

  // Calls under a kGate rule wait while the gate is closed.
  void CloseGate();
  void OpenGate();
  // Waits while the gate is closed, up to the hold timeout; false on the
  // timeout. The call counts in at_gate() while it waits.
  bool PassGate();

  // For tests to wait on a fault being in place rather than sleep: the
  // calls held by kReorder rules so far (each counted once its target is
  // taken, so calls delivered after that overtake it), and the calls
  // waiting at the closed gate now.
  int64_t held() const;
  int64_t at_gate() const;
  // Wait until held() (at_gate()) >= n, or `timeout`; false on the timeout.
  bool AwaitHeld(int64_t n, absl::Duration timeout) const;
  bool AwaitAtGate(int64_t n, absl::Duration timeout) const;

  absl::Duration hold_timeout() const { return hold_timeout_; }

 private:
  const absl::Duration hold_timeout_;
  mutable Mutex mu_;
  mutable CondVar changed_;
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);
  std::map<CallKind, int64_t> delivered_ ABSL_GUARDED_BY(mu_);
  bool gate_closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t at_gate_ ABSL_GUARDED_BY(mu_) = 0;
};

enum class CutMode {
  kNone,
  // Every call fails at once with UNAVAILABLE.
  kFail,
  // Every call hangs until its deadline (a pull's, or the wrapper's
  // call_timeout) and fails with DEADLINE_EXCEEDED; UNAVAILABLE if the link
  // comes back first.
  kHang,
};

struct FaultStats {
  int64_t delivered = 0;  // calls that reached the wrapped client
  int64_t delivered_pushes = 0;
  int64_t dropped_requests = 0;
  int64_t dropped_replies = 0;
  int64_t delayed = 0;
  int64_t duplicated = 0;
  int64_t reordered = 0;
  int64_t reorder_timeouts = 0;  // holds that ended on the hold timeout
  int64_t gated = 0;
  int64_t gate_timeouts = 0;  // gate waits that ended on the hold timeout
  int64_t cut_calls = 0;      // calls that failed or hung while cut off
  // The status of each duplicate's second send.
  std::vector<absl::Status> second_sends;
};

class FaultInjectionPsClient final : public PsClient {
 public:
  // `inner` and `injector` are not owned and must outlive the wrapper.
  // `worker_id` names the worker in the injected errors. Calls without a
  // deadline of their own hang for at most `call_timeout` when cut off.
  FaultInjectionPsClient(PsClient* inner, FaultInjector* injector,
                         int worker_id,
                         absl::Duration call_timeout = absl::Seconds(60));

  void AddRule(const FaultRule& rule);
  void SetCut(CutMode mode);
  FaultStats stats() const;

  const Placement& placement() const override { return inner_->placement(); }
  absl::Status AwaitServing(absl::Time deadline) override {
    return inner_->AwaitServing(deadline);
  }
  absl::Status Initialize(
      absl::Span<const NamedConstTensorView> variables) override;
  absl::Status Join() override;
  // A Join (CallKind::kJoin) of a new incarnation.
  absl::Status Rejoin() override;
  absl::Status Leave() override;
  absl::Status LeaveFailed(absl::string_view reason) override;
  absl::StatusOr<std::vector<VariableSpec>> Variables() override {
    return inner_->Variables();
  }
  absl::StatusOr<ModelVersion> Pull(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  absl::StatusOr<PushResult> Push(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  // Faults as for Pull and Push.
  absl::StatusOr<ModelVersion> PullPart(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  absl::StatusOr<PushResult> PushPart(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  // Faults as for Push.
  void InterruptPulls() override { inner_->InterruptPulls(); }
  void ResumePulls() override { inner_->ResumePulls(); }
  absl::StatusOr<PushResult> CommitPush(const ModelVersion& version) override;
  absl::StatusOr<std::vector<ShardStatus>> Status() override;
  absl::Status Shutdown(absl::string_view reason) override;
  absl::Status Rollback(int64_t label, int64_t generation) override;
  absl::Status RequestCheckpoint(int64_t label, bool now) override;
  absl::StatusOr<DataChunk> LeaseData(int64_t generation,
                                      const DataChunkRef* give_back) override;

 private:
  struct Rule {
    FaultRule rule;
    int64_t seen = 0;     // matching calls so far
    int64_t applied = 0;  // times it applied
  };

  // The action for a call of `kind` (or none), and the cut mode it meets.
  bool ChooseLocked(CallKind kind, FaultRule* chosen)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a call meets while cut off (blocks in kHang mode until `deadline`
  // or the link comes back).
  absl::Status CutOff(CallKind kind, absl::Time deadline);
  // Pull / PullPart and Push / PushPart (a duplicate's first result is
  // the caller's) through Inject.
  absl::StatusOr<ModelVersion> InjectPull(
      absl::Time deadline,
      const std::function<absl::StatusOr<ModelVersion>()>& pull);
  absl::StatusOr<PushResult> InjectPush(
      const std::function<absl::StatusOr<PushResult>()>& push);
  // Runs `call` with the faults that apply to a call of `kind`.
  absl::Status Inject(CallKind kind, absl::Time deadline,
                      const std::function<absl::Status()>& call);

  PsClient* const inner_;          // Not owned.
  FaultInjector* const injector_;  // Not owned.
  const int worker_id_;
  const absl::Duration call_timeout_;
  mutable Mutex mu_;
  CondVar cut_changed_;
  std::vector<Rule> rules_ ABSL_GUARDED_BY(mu_);
  CutMode cut_ ABSL_GUARDED_BY(mu_) = CutMode::kNone;
  FaultStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_TESTING_FAULT_INJECTION_CLIENT_H_
