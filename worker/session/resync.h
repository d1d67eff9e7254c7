// How a worker gets back in step with the parameter servers after a failure
// (a server killed and restarted, a rollback under way, a link that came
// back), as a pure decision over the shards' statuses, and what the
// rollbacks cost, for the run's summary. docs/RELIABILITY.md has the
// protocol; ClusterWorker::Recover (cluster_worker.h) acts on the decision.
//
// Thread-safety: pure functions.
#ifndef PSGD_WORKER_SESSION_RESYNC_H_
#define PSGD_WORKER_SESSION_RESYNC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ps/state/types.h"

namespace psgd {

struct ResyncDecision {
  enum class Kind {
    // Every shard is in `generation` (0: none is initialised yet): go on.
    kInSync,
    // Send Rollback(label, generation) to every shard, then look again.
    kRollback,
    // Wait a moment and look again (`why` says what for).
    kWait,
    // The servers are shutting down: training is over.
    kShutDown,
  };
  Kind kind = Kind::kWait;
  int64_t generation = 0;
  int64_t label = -1;
  std::string why;
};

// The decision for `shards` (one status per shard, in order):
//  * a shard shutting down: kShutDown;
//  * a shard that restored a checkpoint and awaits the rollback: kRollback
//    to the oldest checkpoint such shards restored, in a generation above
//    every shard's;
//  * shards in different generations (a rollback some shards have taken
//    and others not yet): kRollback to the newest generation's checkpoint
//    (repeating it is harmless);
//  * some shards initialised and others not (a server restarted with no
//    checkpoint, or the chief's Initialize under way): kWait;
//  * otherwise kInSync.
ResyncDecision DecideResync(const std::vector<ps::ShardStatus>& shards);

// What the rollbacks of a run cost, from the shards' records at its end.
struct RollbackSummary {
  int64_t rollbacks = 0;  // generations started by a rollback
  // Per rollback, the steps redone: the furthest any shard had gone past the
  // checkpoint it returned to (from_step - to_step). Their sum and maximum.
  int64_t steps_redone = 0;
  int64_t max_steps_redone = 0;
};
RollbackSummary SummarizeRollbacks(const std::vector<ps::ShardStatus>& shards);

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_RESYNC_H_
