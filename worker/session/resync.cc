#include "worker/session/resync.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace psgd {

namespace {

// True when the rollback to `label` that a restored shard awaits is under
// way already: every shard not awaiting is in `generation`, which rolled it
// back to `label`, and is still at that step (no step completes while a
// shard awaits: the workers cannot pull from it). Another worker started
// that rollback after reading the same statuses; the awaiting shard only has
// to take the generation.
bool RollbackUnderWay(const std::vector<ps::ShardStatus>& shards, int64_t label,
                      int64_t generation) {
  int moved = 0;
  for (const ps::ShardStatus& s : shards) {
    if (s.awaiting_rollback) continue;
    if (s.generation != generation) return false;
    // The step the checkpoint put it at, and no step since.
    const bool took = std::any_of(s.rollbacks.begin(), s.rollbacks.end(),
                                  [&](const ps::RollbackRecord& r) {
                                    return r.generation == generation &&
                                           r.label == label &&
                                           r.to_step == s.step;
                                  });
    if (!took) return false;
    ++moved;
  }
  return moved > 0;
}

}  // namespace

ResyncDecision DecideResync(const std::vector<ps::ShardStatus>& shards) {
  ResyncDecision d;
  int64_t max_generation = 0, oldest_restored = -1;
  int initialized = 0;
  for (const ps::ShardStatus& s : shards) {
    if (s.shutting_down) {
      d.kind = ResyncDecision::Kind::kShutDown;
      d.why = absl::StrCat("shard ", s.shard_index, " is shutting down");
      return d;
    }
    max_generation = std::max(max_generation, s.generation);
    initialized += s.initialized;
    if (s.awaiting_rollback &&
        (oldest_restored < 0 || s.restored_label < oldest_restored)) {
      oldest_restored = s.restored_label;
    }
  }
  if (oldest_restored >= 0) {
    d.kind = ResyncDecision::Kind::kRollback;
    d.label = oldest_restored;
    d.generation = RollbackUnderWay(shards, oldest_restored, max_generation)
                       ? max_generation
                       : max_generation + 1;
    d.why = absl::StrCat("a shard restored checkpoint step-", oldest_restored);
    return d;
  }
  if (initialized > 0 && initialized < static_cast<int>(shards.size())) {
    for (const ps::ShardStatus& s : shards) {
      if (s.initialized) continue;
      d.why = absl::StrCat(
          "shard ", s.shard_index,
          " holds no variables while others do (restarted without a "
          "checkpoint to restore?)");
      break;
    }
    return d;  // kWait
  }
  for (const ps::ShardStatus& s : shards) {
    if (s.generation == max_generation) continue;
    // Some shards have not taken the newest rollback yet: repeat it.
    for (const ps::ShardStatus& newest : shards) {
      if (newest.generation != max_generation) continue;
      for (const ps::RollbackRecord& r : newest.rollbacks) {
        if (r.generation != max_generation) continue;
        d.kind = ResyncDecision::Kind::kRollback;
        d.label = r.label;
        d.generation = max_generation;
        d.why = absl::StrCat("shard ", s.shard_index, " is in generation ",
                             s.generation, ", shard ", newest.shard_index,
                             " in ", max_generation);
        return d;
      }
    }
    d.why = absl::StrCat("the shards are in different generations (",
                         s.generation, " and ", max_generation, ")");
    return d;  // kWait
  }
  d.kind = ResyncDecision::Kind::kInSync;
  d.generation = initialized == 0 ? 0 : max_generation;
  return d;
}

RollbackSummary SummarizeRollbacks(const std::vector<ps::ShardStatus>& shards) {
  std::map<int64_t, int64_t> redone;  // generation -> steps
  for (const ps::ShardStatus& s : shards) {
    for (const ps::RollbackRecord& r : s.rollbacks) {
      int64_t& steps = redone[r.generation];
      steps = std::max(steps, r.from_step - r.to_step);
    }
  }
  RollbackSummary out;
  out.rollbacks = static_cast<int64_t>(redone.size());
  for (const auto& [generation, steps] : redone) {
    out.steps_redone += steps;
    out.max_steps_redone = std::max(out.max_steps_redone, steps);
  }
  return out;
}

}  // namespace psgd
