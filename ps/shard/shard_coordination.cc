// One decision per push across every shard (docs/PS.md, "One decision per
// push"): shard 0 decides the pushes staged on every shard and publishes
// its decisions; the other shards apply them in order.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

// How many applied decisions a follower remembers to tell a repeat from a
// disagreement.
constexpr size_t kRecentDecisions = 1024;

bool SameDecision(const Decision& a, const Decision& b) {
  return a.kind == b.kind && a.step == b.step && a.workers == b.workers &&
         a.push_ids == b.push_ids;
}

}  // namespace

absl::StatusOr<PushReply> ParameterShard::Commit(int worker_id, int64_t step,
                                                 int64_t generation,
                                                 uint64_t push_id,
                                                 const DataChunkRef* chunk) {
  const std::string context = absl::StrCat(
      name_, ": commit of worker ", worker_id, "'s push for step ", step, ": ");
  // Flow control: the other shards keep every push until its decision
  // reaches them; a commit waits while too many decisions are on their way
  // (async workers outrun the relay). A shard that does not take them (down,
  // restarting) is not waited for beyond a few seconds.
  if (relay_ != nullptr &&
      !relay_->AwaitBacklogAtMost(kMaxDecisionBacklog,
                                  absl::Now() + absl::Seconds(5))) {
    spdlog::warn("{}: {} decisions have not reached every shard for 5 s", name_,
                 relay_->backlog());
  }
  PushReply reply;
  Ready ready;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    status = CheckGenerationLocked(generation);
    if (status.ok()) status = CheckPushLocked(worker_id, step);
    if (status.ok() && (!coordinated() || follower())) {
      status = absl::FailedPreconditionError(
          "only shard 0 of a cluster of several shards decides pushes");
    }
    const StagedPush* kept = stage_.FindComplete(worker_id, push_id);
    if (status.ok() && (kept == nullptr || kept->step != step ||
                        kept->generation != generation_)) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "push ", push_id, " is not staged here complete for that step"));
    }
    if (status.ok()) {
      // The worker's pushes staged before this one were never committed.
      const StagedPush staged = *stage_.TakeComplete(worker_id, push_id);
      status = DecideLocked(worker_id, step, staged.Gradients(), chunk, &reply,
                            &ready, push_id);
      // A push not taken: the other shards drop their staged copies.
      const bool taken =
          status.ok() && (reply.outcome == PushOutcome::kApplied ||
                          reply.outcome == PushOutcome::kAggregated);
      if (!taken) {
        Decision d;
        d.kind = Decision::Kind::kDropped;
        d.step = step;
        d.workers = {worker_id};
        d.push_ids = {push_id};
        d.dropped = !status.ok()
                        ? (PushRefusalOf(status) == PushRefusal::kTooStale
                               ? Decision::Dropped::kRefusedTooStale
                               : Decision::Dropped::kRefused)
                    : reply.outcome == PushOutcome::kDroppedSurplus
                        ? Decision::Dropped::kSurplus
                        : Decision::Dropped::kStale;
        PublishLocked(std::move(d));
      }
    }
    if (!status.ok()) ++counters_.refused;
  }
  RunReady(&ready);
  if (!status.ok()) return Annotate(status, context);
  return reply;
}

void ParameterShard::ConnectFollowers(DecisionRelay::Deliver deliver) {
  if (relay_ != nullptr) relay_->set_deliver(std::move(deliver));
}

bool ParameterShard::AwaitDecisionsDelivered(absl::Time deadline) {
  return relay_ == nullptr || relay_->AwaitDelivered(deadline);
}

void ParameterShard::PublishLocked(Decision d) {
  if (relay_ == nullptr) return;
  d.seq = ++last_published_;
  relay_->Publish(std::move(d));
}

std::optional<DecidedChunk> ParameterShard::DecidedChunkLocked(
    int worker_id, const DataChunkRef* chunk) const {
  if (chunk == nullptr) return std::nullopt;
  DecidedChunk c;
  c.worker = worker_id;
  c.chunk = *chunk;
  if (data_.has_value() && ledger_ != nullptr) {
    c.samples = data_->queue().ChunkSamples(chunk->epoch, chunk->index);
  }
  if (data_.has_value()) c.ledger_generation = data_->queue().generation();
  return c;
}

void ParameterShard::PublishSyncStepLocked(double lr_scale, int replicas_next) {
  Decision d;
  d.kind = Decision::Kind::kSyncStep;
  d.step = step_;
  d.lr_scale = lr_scale;
  d.replicas_next = replicas_next;
  for (const StepPush& p : step_pushes_) {
    d.workers.push_back(p.worker);
    d.push_ids.push_back(p.push_id);
    if (p.chunk.has_value()) {
      if (auto c = DecidedChunkLocked(p.worker, &*p.chunk)) {
        d.chunks.push_back(*std::move(c));
      }
    }
  }
  step_pushes_.clear();
  PublishLocked(std::move(d));
}

void ParameterShard::RestartDecisionsLocked() {
  if (relay_ != nullptr) relay_->Restart(generation_);
  last_published_ = 0;
  step_pushes_.clear();
  last_applied_ = 0;
  recent_.clear();
  stage_.ClearComplete();
}

absl::StatusOr<int64_t> ParameterShard::ApplyDecisions(
    int64_t generation, absl::Span<const Decision> decisions) {
  Ready ready;
  absl::Status status;
  int64_t applied = 0;
  {
    MutexLock lock(&mu_);
    status = CheckOpenLocked();
    if (status.ok() && !follower()) {
      status = absl::FailedPreconditionError(
          absl::StrCat(name_,
                       " takes no decisions: only shards other than 0 of a "
                       "cluster of several shards do"));
    }
    if (status.ok() && store_ == nullptr) {
      status = absl::FailedPreconditionError(
          absl::StrCat(name_, " is not initialized"));
    }
    if (status.ok()) {
      status = CheckGenerationLocked(generation > 0 ? generation : -1);
    }
    for (size_t i = 0; status.ok() && i < decisions.size(); ++i) {
      const Decision& d = decisions[i];
      if (d.seq <= last_applied_) {
        // A repeat (the relay sent it again, its answer lost): it must be
        // the same decision, and recent (the relay resends at most one
        // batch, far fewer than the window keeps).
        const Decision* same_seq = nullptr;
        for (const Decision& r : recent_) {
          if (r.seq == d.seq) same_seq = &r;
        }
        if (same_seq == nullptr) {
          status = absl::FailedPreconditionError(absl::StrCat(
              name_, ": decision ", d.seq, " (", DecisionKindName(d.kind),
              " of step ", d.step, ") is older than the ", recent_.size(),
              " decisions kept after decision ", last_applied_,
              ": no relay sends that"));
        } else if (!SameDecision(*same_seq, d)) {
          status = absl::FailedPreconditionError(absl::StrCat(
              name_, ": decision ", d.seq, " (", DecisionKindName(d.kind),
              " of step ", d.step,
              ") disagrees with the one of that seq already applied (",
              DecisionKindName(same_seq->kind), " of step ", same_seq->step,
              ")"));
        }
        continue;
      }
      if (d.seq != last_applied_ + 1) {
        status = absl::FailedPreconditionError(absl::StrCat(
            name_, ": decision ", d.seq, " (step ", d.step,
            ") comes after decision ", last_applied_, ": some are missing"));
        break;
      }
      status = ApplyDecisionLocked(d, &ready);
      if (!status.ok()) break;
      last_applied_ = d.seq;
      ++counters_.decisions_applied;
      recent_.push_back(d);
      if (recent_.size() > kRecentDecisions) recent_.pop_front();
    }
    applied = last_applied_;
  }
  RunReady(&ready);
  if (!status.ok()) return status;
  return applied;
}

absl::Status ParameterShard::ApplyDecisionLocked(const Decision& d,
                                                 Ready* ready) {
  auto refuse = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        name_, ": decision ", d.seq, " (", DecisionKindName(d.kind),
        " of step ", d.step, "): ", why));
  };
  if (d.workers.empty() || d.workers.size() != d.push_ids.size()) {
    return refuse("names no push");
  }
  for (int w : d.workers) {
    if (absl::Status s = membership_.CheckWorkerId(w); !s.ok()) {
      return refuse(s.message());
    }
  }
  // Every number in range, as shard 0's rules make them: a step's scale is
  // count / N with count at most the workers (1 otherwise), staleness is a
  // difference of steps, N of the next step one of 1 .. the workers.
  const int workers = membership_.total_num_replicas();
  if (!(std::isfinite(d.lr_scale) && d.lr_scale > 0 &&
        d.lr_scale <= std::max(1, workers))) {
    return refuse(absl::StrCat("lr_scale ", d.lr_scale,
                               " is not a finite number in (0, ",
                               std::max(1, workers), "]"));
  }
  if (d.staleness < 0) {
    return refuse(absl::StrCat("staleness ", d.staleness, " is negative"));
  }
  if (d.replicas_next < 0 || d.replicas_next > workers) {
    return refuse(absl::StrCat("replicas_next ", d.replicas_next,
                               " is not 0 (none) or N in 1..", workers));
  }
  if (static_cast<int>(d.workers.size()) > workers ||
      (d.kind != Decision::Kind::kSyncStep && d.workers.size() != 1)) {
    return refuse(absl::StrCat("names ", d.workers.size(), " pushes"));
  }
  // The staged gradients of the decision's pushes, all found before
  // anything changes.
  std::vector<std::vector<const float*>> grads;
  std::vector<uint64_t> arrivals;
  int64_t first_step = 0;  // the first push's
  if (d.kind == Decision::Kind::kDropped) {
    // Shard 0 did not take the push: its staged copy goes (it may be gone
    // already: refused here too, or replaced), and so does every push of
    // its worker staged before it (never committed: shard 0 dropped them
    // at this push's commit, as for a push it takes).
    stage_.TakeComplete(d.workers[0], d.push_ids[0]);
    switch (d.dropped) {
      case Decision::Dropped::kStale:
        ++counters_.dropped_stale;
        break;
      case Decision::Dropped::kSurplus:
        ++counters_.dropped_surplus;
        break;
      case Decision::Dropped::kRefusedTooStale:
        ++counters_.refused_too_stale;
        ++counters_.refused;
        break;
      case Decision::Dropped::kRefused:
        ++counters_.refused;
        break;
    }
    return absl::OkStatus();
  }
  if (d.kind != Decision::Kind::kLeft) {
    for (size_t k = 0; k < d.workers.size(); ++k) {
      const StagedPush* kept = stage_.FindComplete(d.workers[k], d.push_ids[k]);
      if (kept == nullptr || kept->generation != generation_) {
        return refuse(absl::StrCat("worker ", d.workers[k], "'s push ",
                                   d.push_ids[k], " is not staged here"));
      }
      grads.push_back(kept->Gradients());
      arrivals.push_back(kept->arrival);
      if (k == 0) first_step = kept->step;
    }
  }
  switch (d.kind) {
    case Decision::Kind::kLeft:
      // After every decision about the worker's pushes: what it still has
      // staged was never committed.
      LeaveLocked(d.workers[0], ready);
      stage_.DropComplete(d.workers[0]);
      return absl::OkStatus();
    case Decision::Kind::kDropped:
      return absl::OkStatus();  // handled above
    case Decision::Kind::kSyncStep: {
      if (d.step != step_) {
        return refuse(absl::StrCat("the shard is at step ", step_));
      }
      if (grads.size() == 1) {
        ApplyLocked(grads[0], d.lr_scale, ready);
      } else {
        aggregator_->Reset();
        for (const std::vector<const float*>& g : grads) aggregator_->Add(g);
        ApplyLocked(aggregator_->Mean(), d.lr_scale, ready);
        aggregator_->Reset();
      }
      // N of the next step is shard 0's choice, not this shard's (which
      // sees no arrivals).
      if (d.replicas_next > 0) {
        aggregator_->set_replicas_to_aggregate(d.replicas_next);
      }
      for (int w : d.workers) membership_.RecordPush(w, d.step);
      counters_.aggregated += static_cast<int64_t>(d.workers.size()) - 1;
      ++counters_.applied;
      // The pushes are spent, and so is every push of their workers staged
      // before them (never committed: shard 0 cannot name them any more).
      for (size_t k = 0; k < d.workers.size(); ++k) {
        stage_.DropCompleteThrough(d.workers[k], arrivals[k]);
      }
      break;
    }
    case Decision::Kind::kAsyncPush: {
      const int w = d.workers[0];
      const int64_t step = first_step;
      membership_.RecordPush(w, step);
      ssp_.Tick(w);
      std::vector<const float*> applied;
      dc_.Compensate(w, step, *store_->current(), grads[0], &applied);
      ApplyLocked(applied, d.lr_scale, ready);
      async_.Record(d.staleness);
      ++counters_.applied;
      // The worker's pushes staged before this one were dropped by shard 0.
      stage_.DropCompleteThrough(w, arrivals[0]);
      break;
    }
  }
  LedgerChunksLocked(d.chunks);
  MaybeSaveLocked();
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace psgd
