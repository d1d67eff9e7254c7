#include "ps/shard/shard_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {
namespace {

// Room for the names, shapes and framing next to the weights in one message.
constexpr int64_t kMessageOverheadBytes = int64_t{64} << 10;

}  // namespace

ShardModel::ShardModel(const ShardOptions& options, int first_n,
                       int worker_capacity, ThreadPool* bulk)
    : options_(options),
      first_n_(first_n),
      bulk_(bulk),
      async_(options.max_push_staleness, options.scale_lr_by_staleness),
      dc_(static_cast<float>(options.dc_asgd_lambda), worker_capacity) {}

absl::Status ShardModel::Initialize(std::unique_ptr<VariableStore> store,
                                    absl::string_view shard_name) {
  const VariableLayout& layout = store->layout();
  const int64_t bytes =
      layout.num_parameters * static_cast<int64_t>(sizeof(float));
  if (bytes + kMessageOverheadBytes > options_.max_message_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(shard_name, ": initialize: the variables take ", bytes,
                     " bytes, more than fits in max_message_bytes=",
                     options_.max_message_bytes,
                     " (raise it, lower split_threshold_bytes or add shards)"));
  }
  ASSIGN_OR_RETURN(optimizer_, CreateOptimizer(ShardOptimizerOptions(options_),
                                               layout.OptimizerSizes(),
                                               layout.VariableNames(), bulk_));
  store_ = std::move(store);
  MakeAggregator();
  step_ = 0;
  step_started_ = absl::Now();
  return absl::OkStatus();
}

absl::Status ShardModel::Restore(const ShardCheckpoint& c,
                                 absl::Span<const TensorBytes> variables,
                                 int64_t generation) {
  if (store_ != nullptr) RETURN_IF_ERROR(store_->CheckSameVariables(variables));
  ASSIGN_OR_RETURN(std::unique_ptr<VariableStore> store,
                   VariableStore::Create(variables, c.step, generation));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   CreateOptimizer(ShardOptimizerOptions(options_),
                                   store->layout().OptimizerSizes(),
                                   store->layout().VariableNames(), bulk_));
  if (absl::Status s = optimizer->LoadState(c.optimizer); !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  store_ = std::move(store);
  optimizer_ = std::move(optimizer);
  step_ = c.step;
  step_started_ = absl::Now();
  // The pending aggregate of a sync step is not saved: those workers push
  // for the step again (their last_push_step is below it).
  MakeAggregator();
  async_.RestoreHistogram(c.staleness_histogram);
  // A new generation: every worker's next pull records the snapshot its
  // pushes are compensated against.
  dc_.Clear();
  return absl::OkStatus();
}

void ShardModel::Save(ShardCheckpoint* c) const {
  c->step = step_;
  c->weights = store_->current();  // immutable: shared, not copied
  c->optimizer = optimizer_->SaveState();
  c->staleness_histogram = async_.histogram();
}

uint32_t ShardModel::Digest() const {
  return StateDigest(*store_->current(), optimizer_->SaveState());
}

void ShardModel::MakeAggregator() {
  aggregator_ =
      std::make_unique<SyncAggregator>(store_->layout().sizes, first_n_);
  if (options_.n_follows_live) {
    aggregator_->set_backups(options_.total_num_replicas -
                             options_.replicas_to_aggregate);
  }
}

int ShardModel::StepN(int num_live) const {
  if (aggregator_ == nullptr) return options_.replicas_to_aggregate;
  return options_.n_follows_live ? aggregator_->Required(num_live)
                                 : aggregator_->replicas_to_aggregate();
}

void ShardModel::ApplySyncStep(const DecisionInputs& in, double lr_scale,
                               int replicas_next) {
  if (in.summed) {
    // Summed in the decision's order as shard 0 took them.
    Apply(aggregator_->Mean(), lr_scale);
  } else if (in.pushes.size() == 1) {
    // The mean of one gradient is the gradient: applied as it is.
    Apply(in.pushes[0], lr_scale);
  } else {
    aggregator_->Reset();
    for (const std::vector<const float*>& g : in.pushes) aggregator_->Add(g);
    Apply(aggregator_->Mean(), lr_scale);
  }
  aggregator_->Reset();
  // N of the next step is shard 0's choice, not this shard's (which may see
  // no arrivals).
  if (replicas_next > 0) aggregator_->set_replicas_to_aggregate(replicas_next);
}

void ShardModel::ApplyAsyncPush(int worker, const DecisionInputs& in,
                                double lr_scale, int64_t staleness) {
  // Delay compensation from this shard's own snapshot of the worker's pull.
  std::vector<const float*> applied;
  dc_.Compensate(worker, in.step, *store_->current(), in.pushes[0], &applied);
  Apply(applied, lr_scale);
  async_.Record(staleness);
}

void ShardModel::Apply(const std::vector<const float*>& grads,
                       double lr_scale) {
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
  step_started_ = absl::Now();
}

ShardModel::Snapshot ShardModel::AnswerPull(int worker) {
  Snapshot s = store_->current();
  if (options_.mode == Mode::kAsync) dc_.RecordPull(worker, s);
  return s;
}

void ShardModel::AddStatus(ShardStatus* s) const {
  s->initialized = store_ != nullptr;
  s->step = step_;
  s->step_started = step_started_;
  s->staleness_histogram = async_.histogram();
  s->dc_compensated = dc_.compensated();
  s->dc_uncompensated = dc_.uncompensated();
  s->num_parameters = store_ == nullptr ? 0 : store_->layout().num_parameters;
  s->pending_gradients = aggregator_ == nullptr ? 0 : aggregator_->count();
}

void ShardModel::AddMemory(ShardMemory* m) const {
  if (store_ != nullptr) {
    const int64_t version = store_->layout().num_parameters * sizeof(float);
    m->weights = version;
    m->weight_versions = (store_->versions_in_memory() - 1) * version;
  }
  if (optimizer_ != nullptr) m->optimizer_slots = optimizer_->SlotBytes();
  if (aggregator_ != nullptr) m->aggregate = aggregator_->bytes();
  m->compensation = dc_.buffer_bytes();
}

std::vector<float> ShardModel::CopySlot(absl::string_view name,
                                        int index) const {
  if (optimizer_ == nullptr) return {};
  absl::Span<const float> slot = optimizer_->Slot(name, index);
  return std::vector<float>(slot.begin(), slot.end());
}

}  // namespace ps
}  // namespace psgd
