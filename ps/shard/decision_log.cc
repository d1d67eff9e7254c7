#include "ps/shard/decision_log.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {
namespace {

bool SameDecision(const Decision& a, const Decision& b) {
  return a.kind == b.kind && a.step == b.step && a.workers == b.workers &&
         a.push_ids == b.push_ids;
}

}  // namespace

void DecisionLog::Publish(Decision d) {
  d.seq = ++last_;
  if (relay_ != nullptr) relay_->Publish(std::move(d));
}

absl::StatusOr<bool> DecisionLog::IsNext(const Decision& d) const {
  if (d.seq > last_) {
    if (d.seq == last_ + 1) return true;
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": decision ", d.seq, " (step ", d.step,
                     ") comes after decision ", last_, ": some are missing"));
  }
  // A repeat (the relay sent it again, its answer lost): it must be the
  // same decision, and recent (the relay resends at most one batch, far
  // fewer than the window keeps).
  const Decision* same_seq = nullptr;
  for (const Decision& r : recent_) {
    if (r.seq == d.seq) same_seq = &r;
  }
  if (same_seq == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        name_, ": decision ", d.seq, " (", DecisionKindName(d.kind),
        " of step ", d.step, ") is older than the ", recent_.size(),
        " decisions kept after decision ", last_, ": no relay sends that"));
  }
  if (!SameDecision(*same_seq, d)) {
    return absl::FailedPreconditionError(absl::StrCat(
        name_, ": decision ", d.seq, " (", DecisionKindName(d.kind),
        " of step ", d.step,
        ") disagrees with the one of that seq already applied (",
        DecisionKindName(same_seq->kind), " of step ", same_seq->step, ")"));
  }
  return false;
}

void DecisionLog::Applied(const Decision& d) {
  last_ = d.seq;
  recent_.push_back(d);
  if (recent_.size() > kRecentDecisions) recent_.pop_front();
}

void DecisionLog::Restart(int64_t generation) {
  if (relay_ != nullptr) relay_->Restart(generation);
  last_ = 0;
  recent_.clear();
}

}  // namespace ps
}  // namespace psgd
