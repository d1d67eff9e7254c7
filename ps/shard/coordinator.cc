#include "ps/shard/coordinator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {

absl::Status Coordinator::CheckLiveNow(const Membership& membership,
                                       int64_t shard_step, int worker_id,
                                       int64_t step) {
  if (!membership.IsLive(worker_id)) {
    return PushRefused(PushRefusal::kNotLive,
                       absl::StrCat("worker ", worker_id,
                                    " is not a live member (join first)"));
  }
  if (step > shard_step) {
    return PushRefused(
        PushRefusal::kFromFuture,
        absl::StrCat("step ", step,
                     " is from the future: the shard is at step ", shard_step));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::CheckDecidable(const Shard& s, int worker_id,
                                         int64_t step) const {
  RETURN_IF_ERROR(CheckLiveNow(*s.membership, s.step, worker_id, step));
  const int64_t last = s.membership->last_push_step(worker_id);
  if (step <= last) {
    return PushRefused(
        PushRefusal::kAlreadyPushed,
        absl::StrCat("worker ", worker_id, " already pushed for step ", last,
                     "; a worker pushes once per step"));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::Decide(const Shard& s, int worker_id, int64_t step,
                                 const std::vector<const float*>& grads,
                                 const DataChunkRef* chunk, uint64_t push_id,
                                 PushReply* reply, std::optional<Made>* made) {
  const absl::Status status =
      DecidePush(s, worker_id, step, grads, chunk, push_id, reply, made);
  const bool taken =
      status.ok() && (reply->outcome == PushOutcome::kApplied ||
                      reply->outcome == PushOutcome::kAggregated);
  if (taken) return status;
  // A push not taken gives its data chunk back to the queue, whatever the
  // reason: dropped as stale or surplus, refused as too stale, or refused
  // before any verdict (a second push for its step, one from the future),
  // after which the worker goes on to its next chunk and never gives this
  // one back itself. Settle does nothing for a chunk the worker no longer
  // holds (back in the queue already, or its worker left).
  if (s.data != nullptr) s.data->Settle(worker_id, chunk, /*kept=*/false);
  // It is a decision too: the other shards drop their staged copies.
  Decision d;
  d.kind = Decision::Kind::kDropped;
  d.step = step;
  d.workers = {worker_id};
  d.push_ids = {push_id};
  d.dropped = !status.ok() ? (PushRefusalOf(status) == PushRefusal::kTooStale
                                  ? Decision::Dropped::kRefusedTooStale
                                  : Decision::Dropped::kRefused)
              : reply->outcome == PushOutcome::kDroppedSurplus
                  ? Decision::Dropped::kSurplus
                  : Decision::Dropped::kStale;
  made->emplace(Made{std::move(d), DecisionInputs()});
  return status;
}

absl::Status Coordinator::DecidePush(const Shard& s, int worker_id,
                                     int64_t step,
                                     const std::vector<const float*>& grads,
                                     const DataChunkRef* chunk,
                                     uint64_t push_id, PushReply* reply,
                                     std::optional<Made>* made) {
  RETURN_IF_ERROR(CheckDecidable(s, worker_id, step));
  if (s.data != nullptr && !s.data->Holds(worker_id, chunk)) {
    // Its samples went back to the queue (the worker left or its lease
    // expired, or a rollback restored the queue): another gradient will
    // carry them. Not counted as the worker's push for the step.
    s.membership->Touch(worker_id, absl::Now());
    ++s.counters->dropped_stale;
    reply->outcome = PushOutcome::kDroppedStale;
    reply->staleness = s.step - step;
    reply->reason =
        absl::StrCat("its data chunk ", chunk->epoch, "/", chunk->index,
                     " is no longer the worker's (back in the "
                     "queue)");
    return absl::OkStatus();
  }
  if (options_.mode == Mode::kAsync) {
    return DecideAsync(s, worker_id, step, grads, chunk, push_id, reply, made);
  }
  DecideSync(s, worker_id, step, grads, chunk, push_id, reply, made);
  return absl::OkStatus();
}

absl::Status Coordinator::DecideAsync(const Shard& s, int worker_id,
                                      int64_t step,
                                      const std::vector<const float*>& grads,
                                      const DataChunkRef* chunk,
                                      uint64_t push_id, PushReply* reply,
                                      std::optional<Made>* made) {
  absl::StatusOr<int64_t> staleness = s.async->Admit(s.step, step);
  if (!staleness.ok()) {
    ++s.counters->refused_too_stale;
    return staleness.status();  // its chunk goes back in Decide
  }
  Made m;
  Decision& d = m.decision;
  d.kind = Decision::Kind::kAsyncPush;
  d.step = step;
  d.workers = {worker_id};
  d.push_ids = {push_id};
  d.lr_scale = s.async->LrScale(*staleness);
  d.staleness = *staleness;
  if (auto c = DecidedChunkOf(s, worker_id, chunk)) d.chunks.push_back(*c);
  s.membership->Touch(worker_id, absl::Now());
  if (s.data != nullptr) s.data->Settle(worker_id, chunk, /*kept=*/true);
  ++s.counters->applied;
  m.inputs.pushes = {grads};
  m.inputs.step = step;
  made->emplace(std::move(m));
  reply->outcome = PushOutcome::kApplied;
  reply->staleness = *staleness;
  reply->reason = absl::StrCat("applied with staleness ", *staleness);
  return absl::OkStatus();
}

void Coordinator::DecideSync(const Shard& s, int worker_id, int64_t step,
                             const std::vector<const float*>& grads,
                             const DataChunkRef* chunk, uint64_t push_id,
                             PushReply* reply, std::optional<Made>* made) {
  Membership& membership = *s.membership;
  SyncAggregator& aggregator = *s.aggregator;
  membership.RecordPush(worker_id, step);
  membership.Touch(worker_id, absl::Now());
  reply->staleness = s.step - step;
  reply->replicas_to_aggregate = s.step_n;
  if (adaptive_ != nullptr) adaptive_->Arrived(step, AdaptiveNow());
  const SyncAggregator::Verdict verdict =
      SyncAggregator::Classify(s.step, step);
  if (verdict == SyncAggregator::Verdict::kStale ||
      verdict == SyncAggregator::Verdict::kSurplus) {
    // Its chunk goes back to the queue in Decide.
    const bool stale = verdict == SyncAggregator::Verdict::kStale;
    ++(stale ? s.counters->dropped_stale : s.counters->dropped_surplus);
    reply->outcome =
        stale ? PushOutcome::kDroppedStale : PushOutcome::kDroppedSurplus;
    reply->reason = stale
                        ? absl::StrCat("stale: computed from step ", step,
                                       ", the shard is at step ", s.step)
                        : absl::StrCat("surplus: step ", step,
                                       " was completed without this gradient");
    return;
  }
  // kAccept (kFuture was refused above). Its chunk is done when the step it
  // joins is applied.
  if (s.data != nullptr) s.data->Settle(worker_id, chunk, /*kept=*/true);
  step_pushes_.push_back(
      {worker_id, push_id,
       chunk == nullptr ? std::nullopt : std::optional<DataChunkRef>(*chunk)});
  int count = 1;
  if (aggregator.count() == 0 &&
      aggregator.Required(membership.num_live()) == 1) {
    // The mean of one gradient is the gradient: applied as it is, without
    // copying it into the aggregate first (one worker, or N = 1).
    ++s.counters->applied;
    made->emplace(CompleteSyncStep(s, &grads));
  } else {
    aggregator.Add(grads);
    count = aggregator.count();
    if (!aggregator.IsComplete(membership.num_live())) {
      ++s.counters->aggregated;
      reply->outcome = PushOutcome::kAggregated;
      reply->reason = absl::StrCat("gradient ", count, " of ",
                                   aggregator.Required(membership.num_live()),
                                   " for step ", step);
      return;
    }
    ++s.counters->applied;
    made->emplace(CompleteSyncStep(s, nullptr));
  }
  reply->outcome = PushOutcome::kApplied;
  reply->reason = absl::StrCat("completed step ", step, " with the average of ",
                               count, " gradients");
}

Coordinator::Made Coordinator::CompleteSyncStep(
    const Shard& s, const std::vector<const float*>* one) {
  const int count = one != nullptr ? 1 : s.aggregator->count();
  Made m;
  Decision& d = m.decision;
  d.kind = Decision::Kind::kSyncStep;
  d.step = s.step;
  d.replicas_next = ChooseNextN(s.step);
  d.lr_scale = NScale(count);
  for (const StepPush& p : step_pushes_) {
    d.workers.push_back(p.worker);
    d.push_ids.push_back(p.push_id);
    if (p.chunk.has_value()) {
      if (auto c = DecidedChunkOf(s, p.worker, &*p.chunk)) {
        d.chunks.push_back(*std::move(c));
      }
    }
  }
  step_pushes_.clear();
  if (one != nullptr) {
    m.inputs.pushes = {*one};
  } else {
    m.inputs.summed = true;  // in the aggregate, in step_pushes_' order
  }
  return m;
}

Decision Coordinator::Left(int64_t shard_step, int worker_id) {
  Decision d;
  d.kind = Decision::Kind::kLeft;
  d.step = shard_step;
  d.workers = {worker_id};
  d.push_ids = {0};
  return d;
}

std::optional<Coordinator::Made> Coordinator::CompleteAfterLeave(
    const Shard& s) {
  // With fewer live workers the gathered gradients may now be enough.
  if (options_.mode != Mode::kSync || s.aggregator == nullptr ||
      !s.aggregator->IsComplete(s.membership->num_live())) {
    return std::nullopt;
  }
  ++s.counters->completed_by_leave;
  return CompleteSyncStep(s, nullptr);
}

std::vector<int> Coordinator::LeasesRunOut(const Membership& membership,
                                           absl::Time now) const {
  if (options_.worker_lease <= absl::ZeroDuration()) return {};
  return membership.LiveNotSeenSince(now - options_.worker_lease);
}

int Coordinator::FirstN(const ShardOptions& options) {
  if (options.mode == Mode::kSync && options.adaptive_backups) {
    return AdaptiveBackups(options.adaptive).n();
  }
  return options.replicas_to_aggregate;
}

void Coordinator::Restart() {
  adaptive_.reset();
  if (options_.mode == Mode::kSync && options_.adaptive_backups) {
    adaptive_ = std::make_unique<AdaptiveBackups>(options_.adaptive);
  }
  step_pushes_.clear();
}

void Coordinator::StepStarted(int64_t step) {
  if (adaptive_ != nullptr) adaptive_->Published(step, AdaptiveNow());
}

double Coordinator::NScale(int count) const {
  // The schedule's scale holds the linear rule for the configured N; a step
  // of `count` gradients takes count / N of it.
  return options_.lr_scale_follows_n && options_.replicas_to_aggregate > 0
             ? static_cast<double>(count) / options_.replicas_to_aggregate
             : 1.0;
}

int Coordinator::ChooseNextN(int64_t step) {
  if (adaptive_ == nullptr) return 0;
  return adaptive_->Completed(step, AdaptiveNow());
}

absl::Time Coordinator::AdaptiveNow() const {
  return options_.adaptive_clock ? options_.adaptive_clock() : absl::Now();
}

std::optional<DecidedChunk> Coordinator::DecidedChunkOf(
    const Shard& s, int worker_id, const DataChunkRef* chunk) {
  if (chunk == nullptr) return std::nullopt;
  DecidedChunk c;
  c.worker = worker_id;
  c.chunk = *chunk;
  if (s.data != nullptr && s.ledger) {
    c.samples = s.data->queue().ChunkSamples(chunk->epoch, chunk->index);
  }
  if (s.data != nullptr) c.ledger_generation = s.data->queue().generation();
  return c;
}

}  // namespace ps
}  // namespace psgd
