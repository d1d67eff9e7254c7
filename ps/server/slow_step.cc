#include "ps/server/slow_step.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psgd {
namespace ps {

std::string SlowStepLog::Check(const ShardStatus& s, absl::Time now) {
  if (threshold_ <= absl::ZeroDuration() || s.mode != Mode::kSync ||
      !s.initialized || s.shutting_down || s.awaiting_rollback ||
      s.waiting_for.empty()) {
    return "";
  }
  const absl::Duration waited = now - s.step_started;
  if (waited < threshold_) return "";
  if (s.step == reported_step_ && s.generation == reported_generation_) {
    return "";
  }
  reported_step_ = s.step;
  reported_generation_ = s.generation;
  return absl::StrCat(
      "shard ", s.shard_index, ": step ", s.step, " has waited ",
      absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(100))),
      " with ", s.pending_gradients, " of ", s.replicas_to_aggregate,
      " gradients; waiting for worker(s) ", absl::StrJoin(s.waiting_for, ","),
      " (live: ", absl::StrJoin(s.live_workers, ","), ")");
}

}  // namespace ps
}  // namespace psgd
