#include "worker/session/worker_session.h"

#include <algorithm>
#include <future>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace psgd {

absl::Status ValidateSessionOptions(const SessionOptions& o) {
  if (o.worker_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_id is ", o.worker_id, ", must be >= 0"));
  }
  if (o.start_timeout <= absl::ZeroDuration() ||
      o.step_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_timeout (", absl::FormatDuration(o.start_timeout),
        ") and step_timeout (", absl::FormatDuration(o.step_timeout),
        ") must be positive"));
  }
  if (o.ps_unavailable_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "ps_unavailable_timeout must not be negative");
  }
  if (o.allowed_failures < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allowed_failures is ", o.allowed_failures, ", must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckWorkerFailures(const std::vector<ps::ShardStatus>& status,
                                 int allowed) {
  std::map<int, std::string> failed;
  int total = 0;
  for (const ps::ShardStatus& s : status) {
    total = std::max(total, s.total_num_replicas);
    for (const auto& [worker, reason] : s.failed_workers) {
      failed[worker] = reason;
    }
  }
  if (static_cast<int>(failed.size()) <= allowed) return absl::OkStatus();
  std::vector<std::string> each;
  for (const auto& [worker, reason] : failed) {
    each.push_back(absl::StrCat("worker:", worker, " failed: ", reason));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      absl::StrJoin(each, "; "), " (", failed.size(), " of ", total,
      " workers failed, ", allowed,
      " allowed: training.min_workers lets the job go on with fewer "
      "workers)"));
}

WorkerSession::WorkerSession(ps::PsClient* client,
                             std::vector<VariableSpec> variables,
                             std::vector<ps::NamedTensorView> weights,
                             SessionOptions options)
    : client_(client),
      variables_(std::move(variables)),
      weights_(std::move(weights)),
      options_(std::move(options)),
      recovery_(client, options_.worker_id, options_.ps_unavailable_timeout,
                options_.job_end_marker),
      lease_keeper_(client, kLeaseRenewalPeriod) {
  if (options_.overlap) {
    sender_ = std::make_unique<PartSender>(client_);
    if (options_.sync) {
      puller_ = std::make_unique<GroupPuller>(client_, PullGroups(variables_));
    }
  }
}

WorkerSession::~WorkerSession() {
  if (puller_ != nullptr && puller_->in_flight()) puller_->Join().IgnoreError();
  if (lease_ahead_call_.valid()) lease_ahead_call_.wait();
}

absl::Status WorkerSession::Initialize(
    absl::Span<const ps::NamedConstTensorView> initial) {
  RETURN_IF_ERROR(
      recovery_.Retrying([&]() { return client_->Initialize(initial); }));
  spdlog::info("initialised {} variables on {} shard(s)", initial.size(),
               client_->num_shards());
  return absl::OkStatus();
}

absl::Status WorkerSession::Start() {
  RETURN_IF_ERROR(ValidateSessionOptions(options_));
  RETURN_IF_ERROR(recovery_.Retrying([&]() { return client_->Join(); }));
  // The first pull also waits for the chief's initialisation.
  absl::StatusOr<ps::ModelVersion> pulled =
      PullSynced(AnyStepOf(client_->num_shards(), 0), options_.start_timeout,
                 /*line_up=*/false);
  if (!pulled.ok()) {
    return Annotate(pulled.status(),
                    "waiting for the servers to be initialised: ");
  }
  version_ = *std::move(pulled);
  if (GlobalStep(version_) == 0) RETURN_IF_ERROR(AwaitOtherWorkers());
  return absl::OkStatus();
}

absl::Status WorkerSession::AwaitOtherWorkers() {
  // A sync step completes with min(N, live workers) gradients: a worker
  // that pushed before the others joined would complete steps alone.
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<ps::ShardStatus> status, Status());
    size_t joined = status[0].live_workers.size();
    int64_t step = status[0].step;
    for (const ps::ShardStatus& s : status) {
      joined = std::min(joined, s.live_workers.size());
      step = std::min(step, s.step);
    }
    const size_t expected = status[0].total_num_replicas;
    RETURN_IF_ERROR(CheckWorkerFailures(status, options_.allowed_failures));
    if (joined >= expected || step > 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      spdlog::warn(
          "{} of {} workers joined within {}; starting without the "
          "others",
          joined, expected, absl::FormatDuration(options_.start_timeout));
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

const ps::ModelVersion& WorkerSession::ahead_version() const {
  if (puller_ != nullptr && puller_->in_flight()) return puller_->wanted();
  return version_;
}

ps::ModelVersion WorkerSession::PushTarget() const {
  // Every shard gets the gradient: shard 0 decides it for all of them
  // (docs/PS.md, "One decision per push"), and in sync mode LineUp has
  // made the shards' steps one.
  ps::ModelVersion v = version_;
  v.chunk = chunk_;
  return v;
}

std::string WorkerSession::WaitName(absl::string_view what,
                                    const ps::ModelVersion& v) const {
  return absl::StrCat("worker ", options_.worker_id, ": ", what, " ",
                      GlobalStep(v));
}

absl::StatusOr<PushOutcome> WorkerSession::Push(
    absl::Span<const ps::NamedConstTensorView> gradients) {
  const ps::ModelVersion target = PushTarget();
  chunk_unsettled_ = chunk_.has_value() && !target.steps.empty() &&
                     target.steps[0] == ps::kNoPush;
  absl::StatusOr<ps::PushResult> pushed;
  {
    // While a shard takes its time (paused, far behind), the others, shard
    // 0 among them, hear nothing from this worker: its lease is kept.
    LeaseKeeper::Hold hold(&lease_keeper_,
                           WaitName("the push for step", target));
    pushed = client_->Push(target, gradients);
  }
  return Settle(std::move(pushed), gradients);
}

void WorkerSession::AddPart(ps::NamedConstTensorView gradient) {
  if (!parts_begun_) {
    const ps::ModelVersion target = PushTarget();
    chunk_unsettled_ = chunk_.has_value() && !target.steps.empty() &&
                       target.steps[0] == ps::kNoPush;
    sender_->Begin(target);
    parts_begun_ = true;
  }
  sender_->Add(std::move(gradient));
}

absl::StatusOr<PushOutcome> WorkerSession::FinishParts(
    absl::Span<const ps::NamedConstTensorView> gradients) {
  parts_begun_ = false;
  absl::StatusOr<ps::PushResult> pushed;
  {
    LeaseKeeper::Hold hold(&lease_keeper_,  // as in Push
                           WaitName("the push for step", PushTarget()));
    pushed = sender_->Finish();
  }
  return Settle(std::move(pushed), gradients);
}

absl::StatusOr<PushOutcome> WorkerSession::Settle(
    absl::StatusOr<ps::PushResult> pushed,
    absl::Span<const ps::NamedConstTensorView> gradients) {
  const ps::ModelVersion push_to = PushTarget();
  PushOutcome o;
  o.generation = version_.generation;
  while (!pushed.ok() && IsTransient(pushed.status(), /*deadline_too=*/true)) {
    ASSIGN_OR_RETURN(o.generation, recovery_.Recover(pushed.status()));
    if (o.generation != version_.generation) {
      o.outcome = StepOutcome::kRolledBack;  // from weights now undone
      return o;
    }
    // The same gradient again, whole: shards that had it refuse the copy.
    LeaseKeeper::Hold hold(&lease_keeper_,
                           WaitName("the push again for step", push_to));
    pushed = client_->Push(push_to, gradients);
  }
  if (pushed.ok()) {
    o.outcome = OutcomeOfReplies(*pushed, &o.staleness);
    for (const ps::PushReply& r : pushed->shards) {
      if (!r.skipped) {
        o.replicas_to_aggregate =
            std::max(o.replicas_to_aggregate, r.replicas_to_aggregate);
        if (!options_.sync && o.outcome == StepOutcome::kApplied) {
          o.step_made = std::max(o.step_made, r.step);
        }
      }
    }
    return o;
  }
  const absl::optional<StepOutcome> refused = OutcomeOfRefusal(pushed.status());
  if (!refused.has_value()) return pushed.status();
  o.outcome = *refused;
  if (*refused == StepOutcome::kRejoined) {
    // Its lease ran out (a pause longer than the lease, or a wait on
    // another shard): shard 0 refused the push (not live, or the push it
    // had staged dropped with the lease). Join again as a new incarnation
    // at the current step: every shard drops what this worker had staged
    // and shard 0 takes back its chunks, so that nothing it sent before
    // is applied late; this gradient is refused, and the pull after it
    // re-syncs. A chunk leased ahead went back with them.
    spdlog::warn(
        "worker {}: push refused ({}); joining again as a new incarnation "
        "and pulling the current weights (this gradient is not applied)",
        options_.worker_id, std::string(pushed.status().message()));
    RETURN_IF_ERROR(Rejoin());
  }
  return o;
}

absl::Status WorkerSession::PullAfterPush(const PushOutcome& pushed) {
  // Sync: wait until each shard is past the step this worker pushed to it
  // (its own gradient counts towards that step, so this never waits for a
  // step it could not help complete), then line the shards up. A dropped
  // gradient did not count: the newest weights, lined up, without waiting
  // (when every worker's push of a step was dropped - a rollback gave their
  // data chunks back to the queue under them - a wait for the next step
  // would last for ever). Async: the newest weights, from each shard once
  // it has applied this worker's push, if it was applied (shard 0 decided
  // it; the others apply the decision in their own time); after a rejoin or
  // a rollback any newer weights, without waiting.
  const bool line_up = options_.sync &&
                       pushed.outcome != StepOutcome::kRejoined &&
                       pushed.outcome != StepOutcome::kRolledBack;
  const bool wait_for_step = line_up &&
                             pushed.outcome != StepOutcome::kDroppedStale &&
                             pushed.outcome != StepOutcome::kDroppedSurplus;
  ps::ModelVersion wanted = AnyStepOf(client_->num_shards(), pushed.generation);
  if (!options_.sync && pushed.step_made > 0 &&
      pushed.generation == version_.generation) {
    wanted = ps::ModelVersion::AtLeast(client_->num_shards(), pushed.step_made);
    wanted.generation = pushed.generation;
  }
  if (wait_for_step) {
    wanted = ps::ModelVersion::AtLeast(client_->num_shards(),
                                       GlobalStep(version_) + 1);
    wanted.generation = version_.generation;
  }
  if (wait_for_step && puller_ != nullptr) {
    // Overlap: one pull per group of variables, on threads of their own;
    // the next forward awaits them variable by variable.
    awaited_ = 0;
    puller_->Start(wanted, absl::Now() + options_.step_timeout, weights_);
    return absl::OkStatus();
  }
  return PullWhole(wanted, line_up);
}

absl::Status WorkerSession::PullWhole(const ps::ModelVersion& wanted,
                                      bool line_up) {
  // Waiting for the next step, the worker stays live on the shards that
  // answered first (lease_keeper.h).
  LeaseKeeper::Hold hold(line_up ? &lease_keeper_ : nullptr,
                         WaitName("the pull for step", wanted));
  absl::StatusOr<ps::ModelVersion> pulled =
      PullSynced(wanted, options_.step_timeout, line_up);
  if (absl::IsCancelled(pulled.status())) return pulled.status();
  if (!pulled.ok()) {
    return Annotate(pulled.status(),
                    absl::StrCat("pulling the weights for step ",
                                 GlobalStep(wanted), ": "));
  }
  version_ = *std::move(pulled);
  return absl::OkStatus();
}

absl::Status WorkerSession::AwaitWeights(int v) {
  if (puller_ == nullptr || !puller_->in_flight()) return absl::OkStatus();
  {
    LeaseKeeper::Hold hold(&lease_keeper_,
                           WaitName("the pull for step", puller_->wanted()));
    RETURN_IF_ERROR(puller_->Await(v));
  }
  // Once every variable is there: the version, before any gradient.
  if (++awaited_ < variables_.size()) return absl::OkStatus();
  return JoinGroups();
}

absl::Status WorkerSession::JoinGroups() {
  absl::StatusOr<ps::ModelVersion> joined;
  {
    LeaseKeeper::Hold hold(&lease_keeper_,
                           WaitName("the pull for step", puller_->wanted()));
    joined = puller_->Join();
  }
  ASSIGN_OR_RETURN(ps::ModelVersion version, std::move(joined));
  if (options_.sync && GlobalStep(version) != NewestStep(version)) {
    return absl::FailedPreconditionError(
        "the shards are at different steps: line them up");
  }
  version_ = std::move(version);
  return absl::OkStatus();
}

absl::Status WorkerSession::PullWholeAfterGroups() {
  if (puller_->in_flight()) puller_->Join().IgnoreError();
  return PullWhole(puller_->wanted(), /*line_up=*/true);
}

absl::Status WorkerSession::SettlePulls() {
  if (puller_ == nullptr || !puller_->in_flight()) return absl::OkStatus();
  if (JoinGroups().ok()) return absl::OkStatus();
  return PullWhole(puller_->wanted(), /*line_up=*/true);
}

absl::StatusOr<ps::ModelVersion> WorkerSession::PullLatest() {
  if (puller_ != nullptr && puller_->in_flight()) JoinGroups().IgnoreError();
  return PullSynced(AnyStepOf(client_->num_shards(), 0), options_.step_timeout,
                    /*line_up=*/false);
}

bool DataNotEnded(const absl::Status& status) {
  return ps::LeaseRefusalOf(status) == ps::LeaseRefusal::kNotEnded;
}

absl::StatusOr<ps::DataChunk> WorkerSession::LeaseData(
    const std::function<bool()>& keep_waiting) {
  if (!options_.data_from_servers) {
    return absl::FailedPreconditionError(
        "the servers hand out no data to this worker (data { sharding: "
        "SERVERS } in the config)");
  }
  CollectLeaseAhead();
  if (leased_ahead_.has_value() && !chunk_unsettled_) {
    ps::DataChunk chunk = *std::move(leased_ahead_);
    leased_ahead_.reset();
    chunk_ = ps::DataChunkRef{chunk.epoch, chunk.index, chunk.lease};
    return chunk;
  }
  // A chunk to give back goes with a lease of its own (the chunk held
  // ahead, if any, stays for the step after).
  std::optional<ps::DataChunkRef> give_back;
  if (chunk_unsettled_) give_back = chunk_;
  chunk_unsettled_ = false;
  // Waiting for the last epoch's chunks still out (DataNotEnded).
  std::optional<absl::Time> waiting_since;
  absl::Duration backoff = absl::Milliseconds(50);
  int rejoins = 0;  // after a lease refused as not live (at most 3)
  for (;;) {
    absl::StatusOr<ps::DataChunk> chunk = client_->LeaseData(
        version_.generation, give_back.has_value() ? &*give_back : nullptr);
    if (chunk.ok()) {
      chunk_ = ps::DataChunkRef{chunk->epoch, chunk->index, chunk->lease};
      if (waiting_since.has_value()) {
        spdlog::info("worker {}: leased chunk {}/{} after waiting {:.1f} s",
                     options_.worker_id, chunk->epoch, chunk->index,
                     absl::ToDoubleSeconds(absl::Now() - *waiting_since));
      }
      return chunk;
    }
    const absl::Status& s = chunk.status();
    if (DataNotEnded(s)) {
      // The shard took the chunk given back, if any, before it answered.
      give_back.reset();
      const absl::Time now = absl::Now();
      if (!waiting_since.has_value()) {
        waiting_since = now;
        spdlog::info("worker {}: waiting for the data: {}", options_.worker_id,
                     std::string(s.message()));
      } else if (now - *waiting_since > options_.step_timeout) {
        return absl::DeadlineExceededError(absl::StrCat(
            "worker ", options_.worker_id, " waited ",
            absl::FormatDuration(options_.step_timeout),
            " (step_timeout) for chunks of the last epoch still out: ",
            s.message()));
      }
      if (keep_waiting && !keep_waiting()) {
        return absl::CancelledError(absl::StrCat(
            "worker ", options_.worker_id,
            ": the wait for the last epoch's chunks was interrupted"));
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
      continue;
    }
    if (waiting_since.has_value() && absl::IsOutOfRange(s)) {
      spdlog::info("worker {}: the data ended after waiting {:.1f} s",
                   options_.worker_id,
                   absl::ToDoubleSeconds(absl::Now() - *waiting_since));
    }
    if (ps::LeaseRefusalOf(s) == ps::LeaseRefusal::kNotLive && rejoins < 3) {
      ++rejoins;
      // Its lease ran out (a pause, or cut off from shard 0, longer than
      // the lease) and this call came before any push could say so: join
      // again as a new incarnation, as a refused push does (every shard
      // drops what this worker staged; shard 0 took back its chunks, so
      // there is nothing to give back and a chunk leased ahead is void),
      // then lease. The step computes on the weights it has; its push is
      // dropped as stale and the pull after it re-syncs.
      spdlog::warn(
          "worker {}: data lease refused ({}); joining again as a new "
          "incarnation",
          options_.worker_id, std::string(s.message()));
      RETURN_IF_ERROR(Rejoin());
      give_back.reset();
      continue;
    }
    if (give_back.has_value() &&
        ps::LeaseRefusalOf(s) == ps::LeaseRefusal::kNotYours) {
      // Not the worker's any more (back in the queue at a rollback): no
      // need to give it back.
      spdlog::info("worker {}: {}", options_.worker_id, s.ToString());
      give_back.reset();
      continue;
    }
    if (!IsTransient(s, /*deadline_too=*/true)) return s;
    ASSIGN_OR_RETURN(const int64_t generation, recovery_.Recover(s));
    if (generation != version_.generation) {
      // A rollback: the weights of the new generation before any data.
      if (puller_ != nullptr && puller_->in_flight()) {
        puller_->Join().IgnoreError();
      }
      RETURN_IF_ERROR(PullWhole(AnyStepOf(client_->num_shards(), generation),
                                /*line_up=*/true));
      give_back.reset();
    }
  }
}

absl::Status WorkerSession::Rejoin() {
  // The lease ahead, if in flight, is awaited first: its chunk goes back
  // with the others at the rejoin and is void.
  if (lease_ahead_call_.valid()) lease_ahead_call_.wait();
  RETURN_IF_ERROR(recovery_.Retrying([&]() { return client_->Rejoin(); }));
  CollectLeaseAhead();
  leased_ahead_.reset();
  return absl::OkStatus();
}

void WorkerSession::LeaseAhead() {
  if (!options_.data_from_servers || lease_ahead_call_.valid() ||
      leased_ahead_.has_value()) {
    return;
  }
  ps::PsClient* const client = client_;
  const int64_t generation = version_.generation;
  lease_ahead_generation_ = generation;
  lease_ahead_call_ = std::async(std::launch::async, [client, generation] {
    return client->LeaseData(generation, /*give_back=*/nullptr);
  });
}

void WorkerSession::CollectLeaseAhead() {
  if (lease_ahead_call_.valid()) {
    absl::StatusOr<ps::DataChunk> chunk = lease_ahead_call_.get();
    if (chunk.ok()) {
      leased_ahead_ = *std::move(chunk);
    } else {
      // The step after leases in its turn. A refusal (the data ended or
      // not yet, not live) leased nothing; another failure is said at
      // warn: had shard 0 leased a chunk before the call failed, that
      // chunk stays with this worker until it leaves.
      const absl::Status& s = chunk.status();
      if (absl::IsOutOfRange(s) ||
          ps::LeaseRefusalOf(s) != ps::LeaseRefusal::kNone) {
        spdlog::debug("worker {}: the lease ahead: {}", options_.worker_id,
                      s.ToString());
      } else {
        spdlog::warn("worker {}: the lease ahead failed: {}",
                     options_.worker_id, s.ToString());
      }
    }
  }
  if (leased_ahead_.has_value() &&
      lease_ahead_generation_ != version_.generation) {
    // Leased before a rollback: void (the rollback put the queue where the
    // checkpoint's weights are, with nothing out).
    spdlog::info(
        "worker {}: chunk {}/{} leased ahead in generation {} is "
        "void in generation {}",
        options_.worker_id, leased_ahead_->epoch, leased_ahead_->index,
        lease_ahead_generation_, version_.generation);
    leased_ahead_.reset();
  }
}

std::optional<ps::DataChunk> WorkerSession::TakeLeasedAhead() {
  CollectLeaseAhead();
  std::optional<ps::DataChunk> chunk = std::move(leased_ahead_);
  leased_ahead_.reset();
  return chunk;
}

void WorkerSession::UseChunk(const ps::DataChunkRef& chunk) {
  chunk_ = chunk;
  chunk_unsettled_ = false;
}

absl::StatusOr<std::vector<ps::ShardStatus>> WorkerSession::Status() {
  std::vector<ps::ShardStatus> status;
  RETURN_IF_ERROR(recovery_.Retrying([&]() -> absl::Status {
    ASSIGN_OR_RETURN(status, client_->Status());
    return absl::OkStatus();
  }));
  return status;
}

absl::Status WorkerSession::Leave() {
  // Pulls still in flight (overlap) end before the buffers are used again.
  if (puller_ != nullptr && puller_->in_flight()) JoinGroups().IgnoreError();
  // A lease ahead on its way lands before the Leave that gives it back.
  if (lease_ahead_call_.valid()) lease_ahead_call_.wait();
  return recovery_.Retrying([&]() { return client_->Leave(); });
}

absl::StatusOr<ps::ModelVersion> WorkerSession::LineUp(
    ps::ModelVersion version) {
  // Shard 0 decides every step for every shard, and the others apply it
  // when its decision reaches them: a pull may find one shard a step ahead
  // of another for a moment. Wait for the lagging shards (they always
  // follow), so that the gradient is computed from one step of every shard.
  if (GlobalStep(version) == NewestStep(version)) return version;
  ps::ModelVersion newest =
      ps::ModelVersion::AtLeast(client_->num_shards(), NewestStep(version));
  newest.generation = version.generation;
  absl::StatusOr<ps::ModelVersion> lined =
      client_->Pull(newest, absl::Now() + options_.step_timeout, weights_);
  if (lined.ok()) lined->server_wait += version.server_wait;
  return lined;
}

absl::StatusOr<ps::ModelVersion> WorkerSession::PullSynced(
    ps::ModelVersion wanted, absl::Duration timeout, bool line_up) {
  for (;;) {
    absl::StatusOr<ps::ModelVersion> pulled =
        client_->Pull(wanted, absl::Now() + timeout, weights_);
    if (pulled.ok() && line_up) pulled = LineUp(*std::move(pulled));
    if (pulled.ok() || absl::IsCancelled(pulled.status())) return pulled;
    absl::Status failure = pulled.status();
    if (absl::IsDeadlineExceeded(failure)) {
      // The step did not come: because a server is unreachable, or really?
      absl::Status reachable = client_->Status().status();
      if (!IsTransient(reachable, /*deadline_too=*/true)) return failure;
      failure = reachable;
    } else if (!IsTransient(failure, /*deadline_too=*/false)) {
      return failure;
    }
    ASSIGN_OR_RETURN(const int64_t generation, recovery_.Recover(failure));
    if (generation != wanted.generation) {
      // The cluster rolled back: the weights of the new generation, now.
      wanted = AnyStepOf(client_->num_shards(), generation);
    }
  }
}

}  // namespace psgd
