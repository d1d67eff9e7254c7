#include "ps/shard/decision_log.h"

#include <algorithm>
#include <cmath>
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

absl::Status DecisionLog::Refuse(const Decision& d,
                                 absl::string_view why) const {
  return absl::FailedPreconditionError(
      absl::StrCat(name_, ": decision ", d.seq, " (", DecisionKindName(d.kind),
                   " of step ", d.step, "): ", why));
}

absl::Status DecisionLog::CheckNumbers(const Decision& d,
                                       const Membership& membership) const {
  if (d.workers.empty() || d.workers.size() != d.push_ids.size()) {
    return Refuse(d, "names no push");
  }
  for (int w : d.workers) {
    if (absl::Status s = membership.CheckWorkerId(w); !s.ok()) {
      return Refuse(d, s.message());
    }
  }
  // Every number in range, as shard 0's rules make them: a step's scale is
  // count / N with count at most the workers (1 otherwise), staleness is a
  // difference of steps, N of the next step one of 1 .. the workers.
  const int workers = membership.total_num_replicas();
  if (!(std::isfinite(d.lr_scale) && d.lr_scale > 0 &&
        d.lr_scale <= std::max(1, workers))) {
    return Refuse(d, absl::StrCat("lr_scale ", d.lr_scale,
                                  " is not a finite number in (0, ",
                                  std::max(1, workers), "]"));
  }
  if (d.staleness < 0) {
    return Refuse(d, absl::StrCat("staleness ", d.staleness, " is negative"));
  }
  if (d.replicas_next < 0 || d.replicas_next > workers) {
    return Refuse(d, absl::StrCat("replicas_next ", d.replicas_next,
                                  " is not 0 (none) or N in 1..", workers));
  }
  if (static_cast<int>(d.workers.size()) > workers ||
      (d.kind != Decision::Kind::kSyncStep && d.workers.size() != 1)) {
    return Refuse(d, absl::StrCat("names ", d.workers.size(), " pushes"));
  }
  return absl::OkStatus();
}

void CountDecision(const Decision& d, PushCounters* counters) {
  switch (d.kind) {
    case Decision::Kind::kSyncStep:
      counters->aggregated += static_cast<int64_t>(d.workers.size()) - 1;
      ++counters->applied;
      break;
    case Decision::Kind::kAsyncPush:
      ++counters->applied;
      break;
    case Decision::Kind::kLeft:
      break;
    case Decision::Kind::kDropped:
      switch (d.dropped) {
        case Decision::Dropped::kStale:
          ++counters->dropped_stale;
          break;
        case Decision::Dropped::kSurplus:
          ++counters->dropped_surplus;
          break;
        case Decision::Dropped::kRefusedTooStale:
          ++counters->refused_too_stale;
          ++counters->refused;
          break;
        case Decision::Dropped::kRefused:
          ++counters->refused;
          break;
      }
      break;
  }
}

}  // namespace ps
}  // namespace psgd
