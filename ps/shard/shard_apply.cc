// The one apply path (docs/PS.md, "One decision per push"): every shard -
// shard 0, each of the others, and a lone shard - applies decisions here,
// in sequence order. Shard 0 (a lone shard too) decides a push by its rules
// (Coordinator::Decide, from DecideLocked in shard_coordination.cc) and
// applies its decision here at once; the other
// shards apply the decisions it sends them (ApplyDecisions,
// shard_coordination.cc) to the gradients they staged.
#include <utility>

#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

void ParameterShard::TakeDecisionLocked(Decision d, const DecisionInputs& in,
                                        Ready* ready) {
  ApplyDecisionLocked(d, in, ready);
  log_.Publish(std::move(d));
}

void ParameterShard::ApplyDecisionLocked(const Decision& d,
                                         const DecisionInputs& in,
                                         Ready* ready) {
  switch (d.kind) {
    case Decision::Kind::kDropped:
      // Shard 0 did not take the push: its staged copy goes (it may be gone
      // already: taken by shard 0's commit, refused here too, or replaced,
      // and a lone shard stages none). A push dropped as stale or surplus
      // takes every push of its worker staged before it along (never
      // committed: shard 0 dropped them at this push's commit, as for a
      // push it takes); a refused one goes alone: it may be a second push
      // for a step whose aggregate still holds the worker's first.
      if (d.dropped == Decision::Dropped::kRefused) {
        stage_.DropOneComplete(d.workers[0], d.push_ids[0]);
      } else {
        stage_.TakeComplete(d.workers[0], d.push_ids[0]);
      }
      return;
    case Decision::Kind::kLeft:
      // After every decision about the worker's pushes: what it still has
      // staged was never committed.
      LeaveHereLocked(d.workers[0], /*drop_complete=*/true, ready);
      return;
    case Decision::Kind::kSyncStep:
      model_.ApplySyncStep(in, d.lr_scale, d.replicas_next);
      for (int w : d.workers) membership_.RecordPush(w, d.step);
      break;
    case Decision::Kind::kAsyncPush:
      membership_.RecordPush(d.workers[0], in.step);
      // Before the pulls the update satisfies are collected: their
      // staleness bound reads the clocks.
      pulls_.Tick(d.workers[0]);
      model_.ApplyAsyncPush(d.workers[0], in, d.lr_scale, d.staleness);
      break;
  }
  StepAdvancedLocked(ready);
  // The pushes staged here are spent, and so is every push of their workers
  // staged before them (never committed: shard 0 cannot name them any more).
  for (size_t k = 0; k < in.arrivals.size(); ++k) {
    stage_.DropCompleteThrough(d.workers[k], in.arrivals[k]);
  }
  // The data chunks the update trained on: done in the queue that handed
  // them out (shard 0's), else in this shard's ledger from the decision.
  data_.Applied(model_.step(), d.chunks);
  // After the counters, so that they are in it.
  checkpoints_.MaybeSave(model_.step(), *this);
}

void ParameterShard::LeaveHereLocked(int worker_id, bool drop_complete,
                                     Ready* ready) {
  stage_.DropParts(worker_id);  // a worker that left loses its staged parts
  data_.Gone(worker_id);
  membership_.Leave(worker_id);
  if (drop_complete) stage_.DropComplete(worker_id);
  // A pull does not wait for a worker that left (staleness_bound).
  if (pulls_.bounded()) {
    CollectReadyLocked(ready);
  }
}

}  // namespace ps
}  // namespace psgd
