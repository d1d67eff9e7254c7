// What a shard learns (docs/ARCHITECTURE.md, "Rooms"): the weights
// (ps/state/variable_store.h), the optimizer's slots, the step and when it
// began, the sync step's aggregate, the async staleness histogram and delay
// compensation's record of each worker's pull; and the updates that change
// them. ParameterShard decides what to apply (its coordinator's rules, or
// shard 0's decisions) and this room applies it: a sync step's mean, an
// async push compensated for its delay, a restored checkpoint.
//
// Not thread-safe: ParameterShard calls it under its mutex. The weights it
// publishes are immutable snapshots, read by pulls without the lock.
#ifndef PSGD_PS_SHARD_SHARD_MODEL_H_
#define PSGD_PS_SHARD_SHARD_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/thread_pool.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/state/async_applier.h"
#include "ps/state/delay_compensation.h"
#include "ps/state/optimizer.h"
#include "ps/state/options.h"
#include "ps/state/sync_aggregator.h"
#include "ps/state/types.h"
#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

class ShardModel {
 public:
  using Snapshot = std::shared_ptr<const WeightsSnapshot>;

  // `first_n`: the sync step's N before any decision chose one (the
  // configured N, or adaptive N's first). `worker_capacity`: the worker
  // ids delay compensation records pulls for. `bulk`: the optimizer's
  // threads (not owned).
  ShardModel(const ShardOptions& options, int first_n, int worker_capacity,
             ThreadPool* bulk);
  ShardModel(const ShardModel&) = delete;
  ShardModel& operator=(const ShardModel&) = delete;

  bool initialized() const { return store_ != nullptr; }
  int64_t step() const { return step_; }
  // When step() began (ShardStatus::step_started).
  absl::Time step_started() const { return step_started_; }
  // Once initialized.
  const VariableStore& store() const { return *store_; }
  // The layout of the variables; null before initialization.
  std::shared_ptr<const VariableLayout> shared_layout() const {
    return store_ == nullptr ? nullptr : store_->shared_layout();
  }
  Snapshot current() const {
    return store_ == nullptr ? nullptr : store_->current();
  }

  // Takes `store` (checked and copied by VariableStore::Create) as the
  // weights of step 0, with fresh optimizer slots. FAILED_PRECONDITION
  // (nothing changes) when they would not fit in options.max_message_bytes,
  // or the optimizer's errors.
  absl::Status Initialize(std::unique_ptr<VariableStore> store,
                          absl::string_view shard_name);
  // Installs checkpoint `c` (`variables`: its weights as tensors,
  // ShardCheckpointing::Variables) in `generation`: weights, optimizer
  // slots, step and staleness histogram; the sync aggregate starts empty (it is
  // not saved) and delay compensation forgets every pull. FAILED_PRECONDITION
  // (nothing changes) when its variables are not the ones held, or its
  // optimizer state does not fit them.
  absl::Status Restore(const ShardCheckpoint& c,
                       absl::Span<const TensorBytes> variables,
                       int64_t generation);
  // The weights (shared, not copied: immutable), optimizer slots, step and
  // staleness histogram into `c`.
  void Save(ShardCheckpoint* c) const;
  // StateDigest of the weights and optimizer slots. Once initialized.
  uint32_t Digest() const;
  // The generation the published weights carry (a rollback to the
  // checkpoint already installed). Once initialized.
  void SetGeneration(int64_t generation) { store_->SetGeneration(generation); }

  // The updates; each advances the step by one. What they read was found
  // and checked before (DecisionInputs). A sync step applies the mean of
  // its pushes (the aggregate, when it was summed as they came) scaled by
  // `lr_scale`, then empties the aggregate; `replicas_next` > 0 is the next
  // step's N.
  void ApplySyncStep(const DecisionInputs& in, double lr_scale,
                     int replicas_next);
  // An async push of `worker`, computed from weights of step in.step, with
  // `staleness` (recorded in the histogram): compensated for its delay
  // against the worker's last pull, then applied.
  void ApplyAsyncPush(int worker, const DecisionInputs& in, double lr_scale,
                      int64_t staleness);
  // The weights for a pull of `worker` (-1: none; async: recorded for delay
  // compensation). Once initialized.
  Snapshot AnswerPull(int worker);

  // The sync aggregate (the coordinator sums a step's gradients into it);
  // null before initialization.
  SyncAggregator* aggregator() { return aggregator_.get(); }
  const AsyncApplier& async() const { return async_; }
  // The current step's N for `num_live` live workers: it follows them
  // (options.n_follows_live), or is the configured or adaptive one.
  int StepN(int num_live) const;

  // Fills ShardStatus's step, initialized, staleness_histogram,
  // dc_compensated, dc_uncompensated, num_parameters, pending_gradients and
  // step_started.
  void AddStatus(ShardStatus* s) const;
  // Fills ShardMemory's weights, weight_versions, optimizer_slots,
  // aggregate and compensation.
  void AddMemory(ShardMemory* m) const;
  // A copy of optimizer slot `name` of variable `index`; empty when there
  // is none or before initialization.
  std::vector<float> CopySlot(absl::string_view name, int index) const;

 private:
  // Optimizer step on `grads` (layout order) and the fold of the batch
  // statistics among them into the running statistics; the step advances.
  void Apply(const std::vector<const float*>& grads, double lr_scale);
  // A fresh aggregate for the store's sizes, of N first_n_.
  void MakeAggregator();

  const ShardOptions& options_;  // the shard's, which outlives the model
  const int first_n_;
  ThreadPool* const bulk_;
  int64_t step_ = 0;
  absl::Time step_started_ = absl::Now();
  // Null until initialized; then replaced only by a restore.
  std::unique_ptr<VariableStore> store_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<SyncAggregator> aggregator_;
  AsyncApplier async_;
  // Delay compensation (docs/PS.md, "Async mode").
  DelayCompensator dc_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_SHARD_MODEL_H_
