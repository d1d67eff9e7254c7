// The one apply path (docs/PS.md, "One decision per push"): every shard -
// shard 0, each of the others, and a lone shard - applies decisions here,
// in sequence order. Shard 0 (a lone shard too) decides a push by its rules
// (Coordinator::Decide, from DecideLocked in shard_coordination.cc) and
// applies its decision here at once; the other
// shards apply the decisions it sends them (ApplyDecisions,
// shard_coordination.cc) to the gradients they staged.
#include <algorithm>
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
      ApplySyncStepLocked(d, in, ready);
      break;
    case Decision::Kind::kAsyncPush:
      ApplyAsyncPushLocked(d, in, ready);
      break;
  }
  // The pushes staged here are spent, and so is every push of their workers
  // staged before them (never committed: shard 0 cannot name them any more).
  for (size_t k = 0; k < in.arrivals.size(); ++k) {
    stage_.DropCompleteThrough(d.workers[k], in.arrivals[k]);
  }
  // The data chunks the update trained on: done in the queue that handed
  // them out (shard 0's), else in this shard's ledger from the decision.
  data_.Applied(step_, d.chunks);
  // After the counters, so that they are in it.
  checkpoints_.MaybeSave(step_, *this);
}

void ParameterShard::ApplySyncStepLocked(const Decision& d,
                                         const DecisionInputs& in,
                                         Ready* ready) {
  if (in.summed) {
    // Summed in the decision's order as shard 0 took them.
    ApplyLocked(aggregator_->Mean(), d.lr_scale, ready);
  } else if (in.pushes.size() == 1) {
    // The mean of one gradient is the gradient: applied as it is.
    ApplyLocked(in.pushes[0], d.lr_scale, ready);
  } else {
    aggregator_->Reset();
    for (const std::vector<const float*>& g : in.pushes) aggregator_->Add(g);
    ApplyLocked(aggregator_->Mean(), d.lr_scale, ready);
  }
  aggregator_->Reset();
  // N of the next step is shard 0's choice, not this shard's (which may see
  // no arrivals).
  if (d.replicas_next > 0) {
    aggregator_->set_replicas_to_aggregate(d.replicas_next);
  }
  for (int w : d.workers) membership_.RecordPush(w, d.step);
}

void ParameterShard::ApplyAsyncPushLocked(const Decision& d,
                                          const DecisionInputs& in,
                                          Ready* ready) {
  const int w = d.workers[0];
  membership_.RecordPush(w, in.step);
  // Before the update, whose collection of ready pulls reads the clocks.
  pulls_.Tick(w);
  // Delay compensation from this shard's own snapshot of the worker's pull.
  std::vector<const float*> applied;
  dc_.Compensate(w, in.step, *store_->current(), in.pushes[0], &applied);
  ApplyLocked(applied, d.lr_scale, ready);
  async_.Record(d.staleness);
}

void ParameterShard::ApplyLocked(const std::vector<const float*>& grads,
                                 double lr_scale, Ready* ready) {
  // The update runs on this thread, under the lock; clang's thread-safety
  // analysis cannot see that inside the lambda.
  Optimizer* optimizer = optimizer_.get();
  const VariableLayout& layout = store_->layout();
  const double learning_rate = optimizer->NextRate(lr_scale);
  store_->Update(
      step_ + 1,
      [&](absl::Span<const float* const> in, absl::Span<float* const> out) {
        // The optimizer writes nothing of a running statistic (size 0 for
        // it): the fold of the batch statistics does.
        optimizer->Apply(in, grads, out, lr_scale);
        for (int i = 0; layout.num_statistics > 0 && i < layout.size(); ++i) {
          if (!layout.statistic[i]) continue;
          if (grads[i] == nullptr) {  // no batch statistics came: unchanged
            std::copy(in[i], in[i] + layout.sizes[i], out[i]);
            continue;
          }
          FoldRunningStatistic(in[i], grads[i], layout.sizes[i], out[i]);
        }
      },
      learning_rate);
  ++step_;
  StartStepLocked();
  CollectReadyLocked(ready);
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
