// The coordinator's rules (docs/PS.md, "One decision per push"): what shard
// 0 of a cluster of several shards, or a lone shard, decides about each
// push, leave and lease. Admission (a live worker, a step not from the
// future, one push per step, a data chunk still the worker's), the sync
// step's N of M (the aggregate made as the gradients come, N following the
// live workers, adaptive backup workers, the learning rate's scale for N),
// async staleness admission and lease expiry. Its rules read and change the
// shard's state through a Coordinator::Shard lent for one call, and every
// update they make, or push they do not take, comes out as a Decision with
// what its update reads; the shard applies it through its one apply path
// (ShardCore::ApplyDecision, shard_core_decisions.cc) and publishes it
// (decision_log.h). A shard other than 0 of several has no Coordinator: it
// applies shard 0's decisions.
//
// The route of a push: the shard stages it (ShardCore::Stage), a commit hands
// it to Decide here, the shard applies what was decided and the log numbers
// it and hands it to the relay (decision_relay.h), which carries it to the
// other shards' apply path.
//
// Thread-safety: none, as leveldb's MemTable: the shard calls it under its
// mutex, with the state it lends.
#ifndef PSGD_PS_SHARD_COORDINATOR_H_
#define PSGD_PS_SHARD_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ps/state/adaptive_backups.h"
#include "ps/state/async_applier.h"
#include "ps/state/data_leases.h"
#include "ps/state/membership.h"
#include "ps/state/options.h"
#include "ps/state/sync_aggregator.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

class Coordinator {
 public:
  // The shard's state that the rules read and change, lent for one call
  // under the shard's mutex (pointers into the shard; not owned).
  struct Shard {
    int64_t step = 0;  // the shard's step
    int step_n = 0;    // the current step's N (ShardStatus)
    Membership* membership = nullptr;
    PushCounters* counters = nullptr;
    SyncAggregator* aggregator = nullptr;  // sync, once initialised
    const AsyncApplier* async = nullptr;
    DataLeases* data = nullptr;  // null without the data queue
    bool ledger = false;         // decided chunks carry their samples
  };
  // A decision, and what its update reads: the shard applies it, then
  // publishes it.
  struct Made {
    Decision decision;
    DecisionInputs inputs;
  };

  // `options` outlives the coordinator (the shard's).
  explicit Coordinator(const ShardOptions& options) : options_(options) {}
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The admission every shard makes as it stages a push: a live worker
  // (kNotLive) and a step not from the future (kFromFuture) of a shard at
  // `shard_step`.
  static absl::Status CheckLiveNow(const Membership& membership,
                                   int64_t shard_step, int worker_id,
                                   int64_t step);
  // The checks a push's decision starts with: CheckLiveNow, and the worker
  // has not pushed for `step` before (kAlreadyPushed).
  absl::Status CheckDecidable(const Shard& s, int worker_id,
                              int64_t step) const;

  // Decides a push whose gradients (layout order) have been matched to the
  // variables: refused (its status), dropped (stale, surplus, a chunk no
  // longer the worker's), aggregated, or applied. Fills `reply` but its
  // step (the shard's once the decision is applied), and `made` with the
  // decision to apply and publish: none for a gradient aggregated into a
  // step not complete yet; a push not taken is a decision too (the other
  // shards drop their staged copies), and its data chunk, if the worker
  // still holds it, goes back to the queue (the chunk of a push taken is
  // done when its step is applied).
  absl::Status Decide(const Shard& s, int worker_id, int64_t step,
                      const std::vector<const float*>& grads,
                      const DataChunkRef* chunk, uint64_t push_id,
                      PushReply* reply, std::optional<Made>* made);

  // A live worker leaves (a Leave or its lease).
  static Decision Left(int64_t shard_step, int worker_id);
  // After a leave is applied: a sync step never waits for a worker that
  // left, so the step whose gathered gradients are now enough completes.
  std::optional<Made> CompleteAfterLeave(const Shard& s);

  // Leases: the live workers not seen since now - options().worker_lease,
  // ascending; none with a zero lease.
  std::vector<int> LeasesRunOut(const Membership& membership,
                                absl::Time now) const;

  // The N of a fresh aggregator: adaptive backup workers' first, else the
  // configured replicas_to_aggregate (every shard's, shard 0's choices
  // follow in its decisions).
  static int FirstN(const ShardOptions& options);
  // A fresh or restored store: the adaptive N starts afresh and the current
  // step has no pushes.
  void Restart();
  // A new generation: the current step's pushes are gone.
  void ClearStep() { step_pushes_.clear(); }
  // Adaptive backup workers: `step`'s weights are published now.
  void StepStarted(int64_t step);

 private:
  // DecidePush's rules, before a push not taken becomes a decision.
  absl::Status DecidePush(const Shard& s, int worker_id, int64_t step,
                          const std::vector<const float*>& grads,
                          const DataChunkRef* chunk, uint64_t push_id,
                          PushReply* reply, std::optional<Made>* made);
  // Async: the staleness limit, then the push applied.
  absl::Status DecideAsync(const Shard& s, int worker_id, int64_t step,
                           const std::vector<const float*>& grads,
                           const DataChunkRef* chunk, uint64_t push_id,
                           PushReply* reply, std::optional<Made>* made);
  // Sync: stale, surplus, aggregated, or the push that completes the step.
  void DecideSync(const Shard& s, int worker_id, int64_t step,
                  const std::vector<const float*>& grads,
                  const DataChunkRef* chunk, uint64_t push_id, PushReply* reply,
                  std::optional<Made>* made);
  // The current sync step is complete: its decision (step_pushes_ in the
  // order they were summed, the learning rate's scale, N of the next step),
  // taken on `one`, the step's single gradient never copied into the
  // aggregate, or (null) on the aggregate.
  Made CompleteSyncStep(const Shard& s, const std::vector<const float*>* one);
  // Sync with options().lr_scale_follows_n: the learning rate's factor for
  // a step of `count` gradients (count / N); else 1.
  double NScale(int count) const;
  // Adaptive backup workers, as the current step completes: N of the next
  // step from the arrivals seen; 0 without.
  int ChooseNextN(int64_t step);
  absl::Time AdaptiveNow() const;
  // The chunk of `worker_id`'s gradient with its samples, for a decision.
  static std::optional<DecidedChunk> DecidedChunkOf(const Shard& s,
                                                    int worker_id,
                                                    const DataChunkRef* chunk);

  const ShardOptions& options_;
  // Sync with adaptive backup workers: chooses the aggregator's N per step.
  // Made by Restart.
  std::unique_ptr<AdaptiveBackups> adaptive_;
  // The current sync step's gradients as they came (worker, push id, chunk
  // or none), for its decision.
  struct StepPush {
    int worker = 0;
    uint64_t push_id = 0;
    std::optional<DataChunkRef> chunk;
  };
  std::vector<StepPush> step_pushes_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_COORDINATOR_H_
