#include "ps/testing/fault_injection_client.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {

absl::string_view CallKindName(CallKind kind) {
  switch (kind) {
    case CallKind::kAny:
      return "call";
    case CallKind::kInitialize:
      return "initialize";
    case CallKind::kJoin:
      return "join";
    case CallKind::kLeave:
      return "leave";
    case CallKind::kPull:
      return "pull";
    case CallKind::kPush:
      return "push";
    case CallKind::kStatus:
      return "status";
    case CallKind::kShutdown:
      return "shutdown";
    case CallKind::kRollback:
      return "rollback";
    case CallKind::kCheckpoint:
      return "checkpoint";
    case CallKind::kLeaseData:
      return "data lease";
  }
  return "call";
}

bool FaultInjector::Draw(double p) {
  if (p >= 1.0) return true;
  if (p <= 0.0) return false;
  MutexLock lock(&mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(random_) < p;
}

void FaultInjector::Delivered(CallKind kind) {
  MutexLock lock(&mu_);
  ++delivered_[kind];
  changed_.SignalAll();
}

bool FaultInjector::AwaitOthers(CallKind kind, int after) {
  MutexLock lock(&mu_);
  const int64_t target = delivered_[kind] + after;
  ++held_;  // the target is taken: calls delivered from now on overtake it
  changed_.SignalAll();
  return changed_.WaitUntil(&mu_, absl::Now() + hold_timeout_, [&]() {
    mu_.AssertHeld();
    return delivered_[kind] >= target;
  });
}

void FaultInjector::CloseGate() {
  MutexLock lock(&mu_);
  gate_closed_ = true;
}

void FaultInjector::OpenGate() {
  MutexLock lock(&mu_);
  gate_closed_ = false;
  changed_.SignalAll();
}

bool FaultInjector::PassGate() {
  MutexLock lock(&mu_);
  ++at_gate_;
  changed_.SignalAll();
  const bool passed =
      changed_.WaitUntil(&mu_, absl::Now() + hold_timeout_, [&]() {
        mu_.AssertHeld();
        return !gate_closed_;
      });
  --at_gate_;
  changed_.SignalAll();
  return passed;
}

int64_t FaultInjector::held() const {
  MutexLock lock(&mu_);
  return held_;
}

int64_t FaultInjector::at_gate() const {
  MutexLock lock(&mu_);
  return at_gate_;
}

bool FaultInjector::AwaitHeld(int64_t n, absl::Duration timeout) const {
  MutexLock lock(&mu_);
  return changed_.WaitUntil(&mu_, absl::Now() + timeout, [&]() {
    mu_.AssertHeld();
    return held_ >= n;
  });
}

bool FaultInjector::AwaitAtGate(int64_t n, absl::Duration timeout) const {
  MutexLock lock(&mu_);
  return changed_.WaitUntil(&mu_, absl::Now() + timeout, [&]() {
    mu_.AssertHeld();
    return at_gate_ >= n;
  });
}

FaultInjectionPsClient::FaultInjectionPsClient(PsClient* inner,
                                               FaultInjector* injector,
                                               int worker_id,
                                               absl::Duration call_timeout)
    : inner_(inner),
      injector_(injector),
      worker_id_(worker_id),
      call_timeout_(call_timeout) {}

void FaultInjectionPsClient::AddRule(const FaultRule& rule) {
  MutexLock lock(&mu_);
  rules_.push_back(Rule{rule});
}

void FaultInjectionPsClient::SetCut(CutMode mode) {
  MutexLock lock(&mu_);
  cut_ = mode;
  cut_changed_.SignalAll();
}

FaultStats FaultInjectionPsClient::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

bool FaultInjectionPsClient::ChooseLocked(CallKind kind, FaultRule* chosen) {
  for (Rule& r : rules_) {
    if (r.rule.call != CallKind::kAny && r.rule.call != kind) continue;
    if (++r.seen <= r.rule.skip) continue;
    if (r.rule.times >= 0 && r.applied >= r.rule.times) continue;
    if (!injector_->Draw(r.rule.probability)) continue;
    ++r.applied;
    *chosen = r.rule;
    return true;
  }
  return false;
}

absl::Status FaultInjectionPsClient::CutOff(CallKind kind,
                                            absl::Time deadline) {
  MutexLock lock(&mu_);
  ++stats_.cut_calls;
  const std::string what =
      absl::StrCat("fault injection: worker ", worker_id_,
                   " is cut off from the servers (", CallKindName(kind), ")");
  if (cut_ == CutMode::kFail) return absl::UnavailableError(what);
  const bool back = cut_changed_.WaitUntil(&mu_, deadline, [this]() {
    mu_.AssertHeld();
    return cut_ != CutMode::kHang;
  });
  if (back) {
    return absl::UnavailableError(
        absl::StrCat(what, ": the link came back, the call was lost"));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(what, ": the call hung until its deadline"));
}

absl::Status FaultInjectionPsClient::Inject(
    CallKind kind, absl::Time deadline,
    const std::function<absl::Status()>& call) {
  FaultRule rule;
  bool chosen = false;
  bool cut = false;
  {
    MutexLock lock(&mu_);
    if (cut_ == CutMode::kNone) chosen = ChooseLocked(kind, &rule);
    if (chosen && rule.action == FaultAction::kCutOff) cut_ = CutMode::kFail;
    cut = cut_ != CutMode::kNone;
  }
  if (cut) return CutOff(kind, deadline);
  auto deliver = [&]() {
    absl::Status s = call();
    injector_->Delivered(kind);
    MutexLock lock(&mu_);
    ++stats_.delivered;
    if (kind == CallKind::kPush) ++stats_.delivered_pushes;
    return s;
  };
  auto count = [&](int64_t FaultStats::*counter) {
    MutexLock lock(&mu_);
    ++(stats_.*counter);
  };
  const std::string what = absl::StrCat("fault injection: ", CallKindName(kind),
                                        " of worker ", worker_id_);
  if (!chosen) return deliver();
  switch (rule.action) {
    case FaultAction::kDropRequest:
      count(&FaultStats::dropped_requests);
      return absl::UnavailableError(
          absl::StrCat(what, " dropped before it reached the servers"));
    case FaultAction::kDropReply:
      deliver().IgnoreError();  // whatever the servers said is lost
      count(&FaultStats::dropped_replies);
      return absl::UnavailableError(absl::StrCat(what, ": the reply was lost"));
    case FaultAction::kDelay:
      count(&FaultStats::delayed);
      absl::SleepFor(rule.delay);
      return deliver();
    case FaultAction::kDuplicate: {
      absl::Status first = deliver();
      // Only a push changes the servers; other calls go once.
      if (kind != CallKind::kPush) return first;
      absl::Status second = deliver();
      MutexLock lock(&mu_);
      ++stats_.duplicated;
      stats_.second_sends.push_back(std::move(second));
      return first;
    }
    case FaultAction::kReorder:
      count(&FaultStats::reordered);
      if (!injector_->AwaitOthers(kind, rule.after)) {
        count(&FaultStats::reorder_timeouts);  // sent without being overtaken
      }
      return deliver();
    case FaultAction::kGate:
      count(&FaultStats::gated);
      if (!injector_->PassGate()) count(&FaultStats::gate_timeouts);
      return deliver();
    case FaultAction::kCutOff:  // handled above
      break;
  }
  return deliver();
}

absl::Status FaultInjectionPsClient::Initialize(
    absl::Span<const NamedConstTensorView> variables) {
  return Inject(CallKind::kInitialize, absl::Now() + call_timeout_,
                [&]() { return inner_->Initialize(variables); });
}

absl::Status FaultInjectionPsClient::Join() {
  return Inject(CallKind::kJoin, absl::Now() + call_timeout_,
                [&]() { return inner_->Join(); });
}

absl::Status FaultInjectionPsClient::Rejoin() {
  return Inject(CallKind::kJoin, absl::Now() + call_timeout_,
                [&]() { return inner_->Rejoin(); });
}

absl::Status FaultInjectionPsClient::Leave() {
  return Inject(CallKind::kLeave, absl::Now() + call_timeout_,
                [&]() { return inner_->Leave(); });
}

absl::Status FaultInjectionPsClient::LeaveFailed(absl::string_view reason) {
  return Inject(CallKind::kLeave, absl::Now() + call_timeout_,
                [&]() { return inner_->LeaveFailed(reason); });
}

absl::StatusOr<ModelVersion> FaultInjectionPsClient::InjectPull(
    absl::Time deadline,
    const std::function<absl::StatusOr<ModelVersion>()>& pull) {
  absl::StatusOr<ModelVersion> result;
  absl::Status s = Inject(CallKind::kPull, deadline, [&]() {
    result = pull();
    return result.status();
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<PushResult> FaultInjectionPsClient::InjectPush(
    const std::function<absl::StatusOr<PushResult>()>& push) {
  absl::StatusOr<PushResult> result;
  bool first = true;
  absl::Status s = Inject(CallKind::kPush, absl::Now() + call_timeout_, [&]() {
    absl::StatusOr<PushResult> r = push();
    absl::Status status = r.status();
    if (first) result = std::move(r);
    first = false;
    return status;
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<ModelVersion> FaultInjectionPsClient::Pull(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  return InjectPull(deadline,
                    [&]() { return inner_->Pull(min_version, deadline, out); });
}

absl::StatusOr<ModelVersion> FaultInjectionPsClient::PullPart(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  return InjectPull(
      deadline, [&]() { return inner_->PullPart(min_version, deadline, out); });
}

absl::StatusOr<PushResult> FaultInjectionPsClient::Push(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  return InjectPush([&]() { return inner_->Push(version, gradients); });
}

absl::StatusOr<PushResult> FaultInjectionPsClient::PushPart(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  return InjectPush([&]() { return inner_->PushPart(version, gradients); });
}

absl::StatusOr<PushResult> FaultInjectionPsClient::CommitPush(
    const ModelVersion& version) {
  return InjectPush([&]() { return inner_->CommitPush(version); });
}

absl::StatusOr<std::vector<ShardStatus>> FaultInjectionPsClient::Status() {
  absl::StatusOr<std::vector<ShardStatus>> result;
  absl::Status s =
      Inject(CallKind::kStatus, absl::Now() + call_timeout_, [&]() {
        result = inner_->Status();
        return result.status();
      });
  if (!s.ok()) return s;
  return result;
}

absl::Status FaultInjectionPsClient::Shutdown(absl::string_view reason) {
  return Inject(CallKind::kShutdown, absl::Now() + call_timeout_,
                [&]() { return inner_->Shutdown(reason); });
}

absl::Status FaultInjectionPsClient::Rollback(int64_t label,
                                              int64_t generation) {
  return Inject(CallKind::kRollback, absl::Now() + call_timeout_,
                [&]() { return inner_->Rollback(label, generation); });
}

absl::Status FaultInjectionPsClient::RequestCheckpoint(int64_t label,
                                                       bool now) {
  return Inject(CallKind::kCheckpoint, absl::Now() + call_timeout_,
                [&]() { return inner_->RequestCheckpoint(label, now); });
}

absl::StatusOr<DataChunk> FaultInjectionPsClient::LeaseData(
    int64_t generation, const DataChunkRef* give_back) {
  absl::StatusOr<DataChunk> result;
  absl::Status s =
      Inject(CallKind::kLeaseData, absl::Now() + call_timeout_, [&]() {
        result = inner_->LeaseData(generation, give_back);
        return result.status();
      });
  if (!s.ok()) return s;
  return result;
}

}  // namespace ps
}  // namespace psgd
