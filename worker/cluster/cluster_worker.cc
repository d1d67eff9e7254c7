#include "worker/cluster/cluster_worker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/cluster/progress.h"
#include "worker/cluster/resync.h"
#include "worker/models/initialize.h"
#include "worker/train/evaluate.h"

namespace psgd {
namespace {

double Seconds(absl::Time a, absl::Time b) {
  return absl::ToDoubleSeconds(b - a);
}

std::vector<ps::NamedTensorView> MutableViews(NamedTensors* tensors) {
  std::vector<ps::NamedTensorView> views;
  views.reserve(tensors->size());
  for (auto& [name, t] : *tensors) views.push_back({name, t.view()});
  return views;
}

std::vector<ps::NamedConstTensorView> ConstViews(const NamedTensors& tensors) {
  std::vector<ps::NamedConstTensorView> views;
  views.reserve(tensors.size());
  for (const auto& [name, t] : tensors) views.push_back({name, t.view()});
  return views;
}

// A failure the worker waits out (Recover): a server unreachable (killed,
// restarting, cut off) or the cluster rolling back to a checkpoint. A
// deadline counts too for calls that do not wait for a step.
bool IsTransient(const absl::Status& s, bool deadline_too) {
  return absl::IsUnavailable(s) || absl::IsAborted(s) ||
         (deadline_too && absl::IsDeadlineExceeded(s));
}

ps::ModelVersion AnyStepOf(int num_shards, int64_t generation) {
  ps::ModelVersion v = ps::ModelVersion::AtLeast(num_shards, 0);
  v.generation = generation;
  return v;
}

}  // namespace

int64_t GlobalStep(const ps::ModelVersion& version) {
  if (version.steps.empty()) return 0;
  return *std::min_element(version.steps.begin(), version.steps.end());
}

int64_t NewestStep(const ps::ModelVersion& version) {
  if (version.steps.empty()) return 0;
  return *std::max_element(version.steps.begin(), version.steps.end());
}

ps::ModelVersion PushVersion(const ps::ModelVersion& version) {
  ps::ModelVersion to = version;
  const int64_t lowest = GlobalStep(version);
  for (int64_t& step : to.steps) {
    if (step != lowest) step = ps::kNoPush;
  }
  return to;
}

absl::Status ValidateClusterWorkerOptions(const ClusterWorkerOptions& o) {
  if (o.worker_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_id is ", o.worker_id, ", must be >= 0"));
  }
  if (o.max_steps < 0 || o.eval_every < 0 || o.eval_examples < 0 ||
      o.log_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_steps (", o.max_steps, "), eval_every (", o.eval_every,
        "), eval_examples (", o.eval_examples, ") and log_every (",
        o.log_every, ") must not be negative"));
  }
  if (o.eval_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_batch is ", o.eval_batch, ", must be >= 1"));
  }
  if (o.max_time < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_time must not be negative");
  }
  if (o.start_timeout <= absl::ZeroDuration() ||
      o.step_timeout <= absl::ZeroDuration() ||
      o.finish_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeouts must be positive");
  }
  return absl::OkStatus();
}

ClusterWorker::ClusterWorker(ps::PsClient* client, Model* model,
                             Batcher* train, const ImageSet* test,
                             ClusterWorkerOptions options,
                             ClusterWorkerCallbacks callbacks)
    : client_(client),
      model_(model),
      train_(train),
      test_(test),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {}

absl::Status ClusterWorker::Evaluate(int64_t global_step, bool final) {
  if (test_ == nullptr) return absl::OkStatus();
  const absl::Time t0 = absl::Now();
  ASSIGN_OR_RETURN(
      StepResult r,
      EvaluateTestSet(model_, *test_, ViewsOf(weights_), options_.eval_batch,
                      final ? 0 : options_.eval_examples));
  EvalRecord e;
  e.global_step = global_step;
  e.test_accuracy = r.accuracy();
  e.test_loss = r.loss;
  e.examples = r.examples;
  e.final = final;
  const absl::Time t1 = absl::Now();
  e.eval_s = Seconds(t0, t1);
  e.wall_time_s = Seconds(start_, t1);
  spdlog::info("step {}: test accuracy {:.4f}, test loss {:.4f} ({} images{})",
               global_step, e.test_accuracy, e.test_loss, e.examples,
               final ? ", final" : "");
  result_.evals.push_back(e);
  if (callbacks_.on_eval) return callbacks_.on_eval(e);
  return absl::OkStatus();
}

absl::Status ClusterWorker::FinishAsChief() {
  // Give the other workers the time to finish their last step and leave,
  // so that none of them finds the servers gone and the final evaluation
  // sees their last updates.
  const absl::Time deadline = absl::Now() + options_.finish_timeout;
  for (;;) {
    std::vector<ps::ShardStatus> status;
    RETURN_IF_ERROR(Retrying([&]() -> absl::Status {
      ASSIGN_OR_RETURN(status, client_->Status());
      return absl::OkStatus();
    }));
    std::vector<int> live;
    for (const ps::ShardStatus& s : status) {
      live.insert(live.end(), s.live_workers.begin(), s.live_workers.end());
    }
    if (live.empty()) break;
    if (absl::Now() >= deadline) {
      std::sort(live.begin(), live.end());
      live.erase(std::unique(live.begin(), live.end()), live.end());
      spdlog::warn(
          "workers {} have not left {} after the chief finished; shutting "
          "the servers down anyway",
          absl::StrJoin(live, ","),
          absl::FormatDuration(options_.finish_timeout));
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }

  // The final weights, without waiting for a step.
  ASSIGN_OR_RETURN(ps::ModelVersion latest,
                   PullSynced(AnyStepOf(client_->num_shards(), 0),
                              options_.step_timeout, /*line_up=*/false));
  result_.final_global_step = GlobalStep(latest);
  RETURN_IF_ERROR(Evaluate(result_.final_global_step, /*final=*/true));
  if (options_.final_checkpoint) {
    // One label for every shard, also when their steps differ (async).
    const int64_t label = NewestStep(latest);
    absl::Status saved = Retrying(
        [&]() { return client_->RequestCheckpoint(label, /*now=*/true); });
    if (!saved.ok()) {
      spdlog::warn("the final checkpoint step-{} failed: {}", label,
                   saved.ToString());
    }
  }
  RETURN_IF_ERROR(Retrying([&]() -> absl::Status {
    ASSIGN_OR_RETURN(result_.server_status, client_->Status());
    return absl::OkStatus();
  }));
  return Retrying([&]() {
    return client_->Shutdown(absl::StrCat("training finished at step ",
                                          result_.final_global_step));
  });
}

absl::StatusOr<ps::ModelVersion> ClusterWorker::LineUp(
    ps::ModelVersion version) {
  // The shards answer a pull independently, so one may already have
  // completed the next step while another has not yet (a push still in
  // flight). Computing on such a mix would tag the pushes with different
  // steps and let the shards drift apart (each drops surplus gradients on
  // its own). So wait, briefly, for the lagging shards to catch up.
  if (GlobalStep(version) == NewestStep(version)) return version;
  const absl::Duration patience =
      std::min(options_.step_timeout, absl::Seconds(2));
  std::vector<ps::NamedTensorView> out = MutableViews(&weights_);
  ps::ModelVersion newest =
      ps::ModelVersion::AtLeast(client_->num_shards(), NewestStep(version));
  newest.generation = version.generation;
  absl::StatusOr<ps::ModelVersion> lined =
      client_->Pull(newest, absl::Now() + patience, out);
  if (lined.ok() || !absl::IsDeadlineExceeded(lined.status())) {
    if (lined.ok()) lined->server_wait += version.server_wait;
    return lined;
  }
  // A lagging shard may need this worker's next gradient (the others have
  // left): go on with the mix; each push is tagged with its shard's step.
  // The failed pull may have written some shards' weights: read them all
  // again, without waiting, so that weights and version agree.
  ++result_.unaligned_steps;
  return client_->Pull(AnyStepOf(client_->num_shards(), version.generation),
                       absl::Now() + options_.step_timeout, out);
}

absl::StatusOr<int64_t> ClusterWorker::Recover(const absl::Status& cause) {
  ++result_.recoveries;
  spdlog::warn("worker {}: {}; re-syncing with the servers",
               options_.worker_id, cause.ToString());
  const absl::Time deadline = absl::Now() + options_.ps_unavailable_timeout;
  absl::Duration backoff = absl::Milliseconds(50);
  absl::Status last = cause;
  for (;;) {
    absl::StatusOr<std::vector<ps::ShardStatus>> status = client_->Status();
    if (!status.ok()) {
      last = status.status();
    } else {
      const ResyncDecision d = DecideResync(*status);
      switch (d.kind) {
        case ResyncDecision::Kind::kShutDown:
          return absl::CancelledError(d.why);
        case ResyncDecision::Kind::kInSync:
          // The servers may have lost this worker (a restarted shard, an
          // expired lease): join again (a no-op when live).
          last = client_->Join();
          if (last.ok()) {
            spdlog::info("worker {}: in step with the servers again "
                         "(generation {})",
                         options_.worker_id, d.generation);
            return d.generation;
          }
          break;
        case ResyncDecision::Kind::kRollback:
          spdlog::warn("worker {}: {}: rolling the cluster back to "
                       "checkpoint step-{} (generation {})",
                       options_.worker_id, d.why, d.label, d.generation);
          last = client_->Rollback(d.label, d.generation);
          if (last.ok()) continue;  // and look again at once
          break;
        case ResyncDecision::Kind::kWait:
          last = absl::UnavailableError(d.why);
          break;
      }
    }
    if (!IsTransient(last, /*deadline_too=*/true)) return last;
    if (absl::Now() + backoff > deadline) {
      return Annotate(
          last, absl::StrCat("the parameter servers did not come back within ",
                             absl::FormatDuration(options_.ps_unavailable_timeout),
                             " (ps_unavailable_timeout): "));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

absl::Status ClusterWorker::Retrying(const std::function<absl::Status()>& call) {
  for (;;) {
    absl::Status s = call();
    if (s.ok() || !IsTransient(s, /*deadline_too=*/true)) return s;
    RETURN_IF_ERROR(Recover(s).status());
  }
}

absl::StatusOr<ps::ModelVersion> ClusterWorker::PullSynced(
    ps::ModelVersion wanted, absl::Duration timeout, bool line_up) {
  std::vector<ps::NamedTensorView> out = MutableViews(&weights_);
  for (;;) {
    absl::StatusOr<ps::ModelVersion> pulled =
        client_->Pull(wanted, absl::Now() + timeout, out);
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
    ASSIGN_OR_RETURN(const int64_t generation, Recover(failure));
    if (generation != wanted.generation) {
      // The cluster rolled back: the weights of the new generation, now.
      wanted = AnyStepOf(client_->num_shards(), generation);
    }
  }
}

void ClusterWorker::MaybeRequestCheckpoint(const ps::ModelVersion& version) {
  if (!options_.chief || options_.checkpoint_every <= absl::ZeroDuration() ||
      absl::Now() < next_checkpoint_) {
    return;
  }
  next_checkpoint_ = absl::Now() + options_.checkpoint_every;
  // Every shard saves at its first step >= label: the same step in sync
  // mode, where the shards move in lockstep.
  const int64_t label = NewestStep(version) + 1;
  absl::Status s = client_->RequestCheckpoint(label, /*now=*/false);
  if (!s.ok()) {
    spdlog::warn("asking for checkpoint step-{}: {}", label, s.ToString());
  }
}

absl::Status ClusterWorker::AwaitOtherWorkers() {
  // A sync step completes with min(N, live workers) gradients: a worker
  // that pushed before the others joined would complete steps alone.
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  for (;;) {
    std::vector<ps::ShardStatus> status;
    RETURN_IF_ERROR(Retrying([&]() -> absl::Status {
      ASSIGN_OR_RETURN(status, client_->Status());
      return absl::OkStatus();
    }));
    size_t joined = status[0].live_workers.size();
    int64_t step = status[0].step;
    for (const ps::ShardStatus& s : status) {
      joined = std::min(joined, s.live_workers.size());
      step = std::min(step, s.step);
    }
    const size_t expected = status[0].total_num_replicas;
    if (joined >= expected || step > 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      spdlog::warn("{} of {} workers joined within {}; starting without the "
                   "others",
                   joined, expected,
                   absl::FormatDuration(options_.start_timeout));
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::StatusOr<ClusterWorkerResult> ClusterWorker::Run() {
  RETURN_IF_ERROR(ValidateClusterWorkerOptions(options_));
  RETURN_IF_ERROR(Start());
  for (;;) {
    // With pulls in flight (overlap), settle them first when the worker
    // stops or the chief evaluates: both need the weights themselves.
    const ps::ModelVersion& ahead = AheadVersion();
    if (!StopReason(ahead).empty() || EvalDue(ahead)) {
      absl::Status settled = SettlePulls();
      if (absl::IsCancelled(settled)) {
        result_.end_reason = "the servers shut down (training is over)";
        break;
      }
      RETURN_IF_ERROR(settled);
    }
    const std::string stop = StopReason(version_);
    if (!stop.empty()) {
      result_.end_reason = stop;
      break;
    }
    RETURN_IF_ERROR(BetweenSteps());
    ASSIGN_OR_RETURN(const bool go_on, Step());
    if (!go_on) break;
  }
  RETURN_IF_ERROR(Finish());
  return result_;
}

absl::Status ClusterWorker::Start() {
  start_ = absl::Now();
  if (options_.checkpoint_every > absl::ZeroDuration()) {
    next_checkpoint_ = start_ + options_.checkpoint_every;
  }
  next_eval_ = options_.eval_every;
  weights_ = InitialValues(model_->variables(), options_.seed);
  if (options_.overlap) {
    sender_ = std::make_unique<PartSender>(client_);
    if (options_.sync) {
      puller_ = std::make_unique<GroupPuller>(
          client_, PullGroups(model_->variables()));
    }
  }
  if (options_.chief) {
    // Shards that restored a checkpoint keep it (already_initialized).
    RETURN_IF_ERROR(
        Retrying([&]() { return client_->Initialize(ConstViews(weights_)); }));
    spdlog::info("initialised {} variables on {} shard(s)",
                 model_->variables().size(), client_->num_shards());
  }
  RETURN_IF_ERROR(Retrying([&]() { return client_->Join(); }));
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

std::string ClusterWorker::StopReason(const ps::ModelVersion& version) const {
  const int64_t global_step = GlobalStep(version);
  if (options_.max_steps > 0 && global_step >= options_.max_steps) {
    return absl::StrCat("reached step ", global_step);
  }
  if (options_.max_time > absl::ZeroDuration() &&
      absl::Now() - start_ >= options_.max_time) {
    return absl::StrCat("the time budget of ",
                        absl::FormatDuration(options_.max_time), " is spent");
  }
  return "";
}

bool ClusterWorker::EvalDue(const ps::ModelVersion& version) const {
  return options_.chief && options_.eval_every > 0 &&
         GlobalStep(version) >= next_eval_;
}

absl::Status ClusterWorker::BetweenSteps() {
  MaybeRequestCheckpoint(AheadVersion());
  const int64_t global_step = GlobalStep(version_);
  if (EvalDue(version_)) {
    RETURN_IF_ERROR(Evaluate(global_step, /*final=*/false));
    next_eval_ = (global_step / options_.eval_every + 1) * options_.eval_every;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ClusterWorker::Step() {
  const absl::Time t0 = absl::Now();
  absl::StatusOr<Batch> batch = train_->Next();
  if (absl::IsOutOfRange(batch.status())) {
    result_.end_reason = "the data ended (epochs done)";
    return false;
  }
  RETURN_IF_ERROR(batch.status());
  const absl::Time t1 = absl::Now();
  absl::StatusOr<ps::PushResult> pushed;
  absl::Time t2;
  std::string stop;
  absl::StatusOr<StepResult> r = ComputeAndPush(*batch, &pushed, &t2, &stop);
  if (absl::IsCancelled(r.status())) {
    result_.end_reason = "the servers shut down (training is over)";
    return false;
  }
  RETURN_IF_ERROR(r.status());
  if (!stop.empty()) {
    result_.end_reason = stop;
    return false;
  }

  StepRecord rec;
  rec.global_step = GlobalStep(version_);
  absl::StatusOr<int64_t> generation =
      PushWithRecovery(gradients_, &rec, std::move(pushed));
  if (absl::IsCancelled(generation.status())) {
    result_.end_reason = "the servers shut down (training is over)";
    return false;
  }
  RETURN_IF_ERROR(generation.status());
  const absl::Time t3 = absl::Now();

  absl::Status pulled = PullAfterPush(rec, *generation);
  if (absl::IsCancelled(pulled)) {
    result_.end_reason = "the servers shut down (training is over)";
    return false;
  }
  RETURN_IF_ERROR(pulled);
  const absl::Time t4 = absl::Now();

  RETURN_IF_ERROR(Record(&rec, *r, *batch, t0, t1, t2, t3, t4));
  return true;
}

ps::ModelVersion ClusterWorker::PushTarget() const {
  // Sync: only the shards at the lowest step get this gradient. Shards that
  // are a step ahead (LineUp gave up: a lagging shard waits for gradients
  // that only come from pushes tagged with its step, e.g. of a worker
  // killed between its pushes and started again) get nothing this time, so
  // that the lagging shards catch up and the next step is aligned; pushing
  // everywhere would keep the shards a step apart for good, every step
  // waiting out LineUp's patience.
  return options_.sync ? PushVersion(version_) : version_;
}

absl::StatusOr<StepResult> ClusterWorker::ComputeAndPush(
    const Batch& batch, absl::StatusOr<ps::PushResult>* pushed,
    absl::Time* t2, std::string* stop) {
  if (sender_ != nullptr) {
    StepResult r;
    ASSIGN_OR_RETURN(const bool overlapped, ComputeOverlapped(batch, &r));
    if (overlapped) {
      *t2 = absl::Now();
      *pushed = sender_->Finish();
      return r;
    }
    // The groups' pulls reached a step to stop at, or the weights were
    // pulled whole again, maybe of a later step than the groups': the
    // worker stops there as it would have before computing, else this step
    // goes on as without overlap.
    *stop = StopReason(version_);
    if (!stop->empty()) return r;
  }
  ASSIGN_OR_RETURN(
      StepResult r,
      model_->ComputeGradients(ViewsOf(weights_), batch.images.view(),
                               batch.labels, &gradients_));
  *t2 = absl::Now();
  *pushed = client_->Push(PushTarget(), ConstViews(gradients_));
  return r;
}

absl::StatusOr<int64_t> ClusterWorker::PushWithRecovery(
    const NamedTensors& gradients, StepRecord* rec,
    absl::StatusOr<ps::PushResult> pushed) {
  const ps::ModelVersion push_to = PushTarget();
  int64_t generation = version_.generation;
  while (!pushed.ok() && IsTransient(pushed.status(), /*deadline_too=*/true)) {
    ASSIGN_OR_RETURN(generation, Recover(pushed.status()));
    if (generation != version_.generation) {
      rec->outcome = StepOutcome::kRolledBack;  // from weights now undone
      return generation;
    }
    // The same gradient again, whole: shards that had it refuse the copy.
    pushed = client_->Push(push_to, ConstViews(gradients));
  }
  if (pushed.ok()) {
    rec->outcome = OutcomeOfReplies(*pushed, &rec->staleness);
    return generation;
  }
  const absl::optional<StepOutcome> refused = OutcomeOfRefusal(pushed.status());
  if (!refused.has_value()) return pushed.status();
  rec->outcome = *refused;
  if (*refused == StepOutcome::kRejoined) {
    // Join again at the current step; this gradient is lost (another shard
    // may have taken it: the shards judge each push on their own).
    spdlog::warn("worker {} was out of the live set ({}); joining again",
                 options_.worker_id, std::string(pushed.status().message()));
    RETURN_IF_ERROR(Retrying([&]() { return client_->Join(); }));
  }
  return generation;
}

absl::Status ClusterWorker::PullAfterPush(const StepRecord& rec,
                                          int64_t generation) {
  // Sync: wait until each shard is past the step this worker pushed to it
  // (its own gradient counts towards that step, so this never waits for a
  // step it could not help complete), then line the shards up. Async (and
  // after a rejoin or a rollback): any newer weights, without waiting.
  const bool wait_for_step = options_.sync &&
                             rec.outcome != StepOutcome::kRejoined &&
                             rec.outcome != StepOutcome::kRolledBack;
  ps::ModelVersion wanted = AnyStepOf(client_->num_shards(), generation);
  if (wait_for_step) {
    wanted = ps::ModelVersion::AtLeast(client_->num_shards(),
                                       GlobalStep(version_) + 1);
    wanted.generation = version_.generation;
  }
  if (wait_for_step && puller_ != nullptr) {
    // Overlap: one pull per group of variables, on threads of their own;
    // the next forward awaits them variable by variable.
    std::vector<ps::NamedTensorView> out;
    for (const VariableSpec& v : model_->variables()) {
      out.push_back({v.name, weights_.at(v.name).view()});
    }
    puller_->Start(wanted, absl::Now() + options_.step_timeout,
                   std::move(out));
    return absl::OkStatus();
  }
  absl::StatusOr<ps::ModelVersion> pulled =
      PullSynced(wanted, options_.step_timeout, wait_for_step);
  if (absl::IsCancelled(pulled.status())) return pulled.status();
  if (!pulled.ok()) {
    return Annotate(pulled.status(),
                    absl::StrCat("pulling the weights after step ",
                                 rec.global_step, ": "));
  }
  version_ = *std::move(pulled);
  return absl::OkStatus();
}

absl::Status ClusterWorker::Record(StepRecord* rec, const StepResult& r,
                                   const Batch& batch, absl::Time t0,
                                   absl::Time t1, absl::Time t2, absl::Time t3,
                                   absl::Time t4) {
  ++result_.local_steps;
  rec->local_step = result_.local_steps;
  rec->epoch = batch.epoch;
  rec->batch_size = r.examples;
  rec->wall_time_s = Seconds(start_, t4);
  rec->loss = r.loss;
  rec->cross_entropy = r.cross_entropy;
  rec->train_accuracy = r.accuracy();
  rec->step_s = Seconds(t0, t4);
  rec->images_per_s = r.examples / rec->step_s;
  rec->input_s = Seconds(t0, t1);
  rec->compute_s = Seconds(t1, t2);
  rec->push_s = Seconds(t2, t3);
  rec->wait_s =
      std::min(absl::ToDoubleSeconds(version_.server_wait), Seconds(t3, t4));
  rec->pull_s = Seconds(t3, t4) - rec->wait_s;
  result_.outcomes[rec->outcome]++;
  step_seconds_ += rec->step_s;
  images_ += r.examples;
  if (callbacks_.on_step) RETURN_IF_ERROR(callbacks_.on_step(*rec));

  window_loss_ += r.loss;
  ++window_steps_;
  if (options_.log_every > 0 && result_.local_steps % options_.log_every == 0) {
    RunEnds ends;
    ends.max_steps = options_.max_steps;
    ends.max_seconds = absl::ToDoubleSeconds(options_.max_time);
    ends.total_batches = train_->epochs() * train_->batches_per_epoch();
    const std::string progress = ProgressText(
        FractionDone(ends, GlobalStep(version_), rec->wall_time_s,
                     batch.epoch * train_->batches_per_epoch() + batch.index +
                         1),
        rec->wall_time_s);
    spdlog::info("step {} (local {}): loss {:.4f}, {:.0f} images/s, last "
                 "step {:.3f} s (pull {:.3f}, compute {:.3f}, push {:.3f}, "
                 "wait {:.3f}), {}{}{}",
                 GlobalStep(version_), result_.local_steps,
                 window_loss_ / window_steps_, images_ / step_seconds_,
                 rec->step_s, rec->pull_s, rec->compute_s, rec->push_s,
                 rec->wait_s, std::string(StepOutcomeName(rec->outcome)),
                 progress.empty() ? "" : "; ", progress);
    window_loss_ = 0.0;
    window_steps_ = 0;
  }
  return absl::OkStatus();
}

absl::Status ClusterWorker::Finish() {
  // Pulls still in flight (overlap) end before the weights are used again.
  if (puller_ != nullptr && puller_->in_flight()) JoinGroups().IgnoreError();
  result_.final_global_step = GlobalStep(version_);
  spdlog::info("worker {} stops after {} steps: {}", options_.worker_id,
               result_.local_steps, result_.end_reason);
  // Leave before anything else, so that no sync step waits for this worker.
  absl::Status left = Retrying([&]() { return client_->Leave(); });
  const bool servers_gone = absl::IsCancelled(left);
  if (!left.ok() && !servers_gone) return left;
  if (options_.chief && !servers_gone) RETURN_IF_ERROR(FinishAsChief());
  result_.seconds = Seconds(start_, absl::Now());
  result_.images_per_s = step_seconds_ > 0 ? images_ / step_seconds_ : 0.0;
  return absl::OkStatus();
}

}  // namespace psgd
