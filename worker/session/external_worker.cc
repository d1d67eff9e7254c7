#include "worker/session/external_worker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_env.h"
#include "common/host_address.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/models/registry.h"
#include "worker/paths.h"
#include "worker/session/model_check.h"
#include "worker/session/task_files.h"
#include "worker/session/task_outputs.h"

namespace psgd {

absl::StatusOr<std::unique_ptr<ExternalWorker>> ExternalWorker::Create(
    const ExternalWorkerOptions& options) {
  if (options.log_every < 0) {
    return absl::InvalidArgumentError("log_every must not be negative");
  }
  const std::string path = ResolveUserPath(options.config_path);
  ASSIGN_OR_RETURN(ClusterConfig loaded, LoadClusterConfig(path));
  if (options.task.empty() && options.cluster_from.empty()) {
    return absl::InvalidArgumentError(
        "a task (\"worker:J\") or cluster_from (\"slurm\", \"tf_config\") "
        "is needed");
  }
  ASSIGN_OR_RETURN(
      ResolvedCluster cluster,
      ResolveTask(
          loaded, options.task, options.cluster_from,
          options.cluster_from.empty() ? Environment() : ProcessEnvironment(),
          options.slurm_port_base));
  if (cluster.task.kind != TaskId::Kind::kWorker) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task '", cluster.task.ToString(), "' (from ", cluster.source,
        ") is a parameter server; run ps_server for it"));
  }
  ASSIGN_OR_RETURN(SessionTaskConfig settings,
                   SessionTaskFromConfig(cluster.config, cluster.task.index));
  ExternalWorkerOptions resolved = options;
  resolved.config_path = path;
  return std::unique_ptr<ExternalWorker>(
      new ExternalWorker(std::move(resolved), std::move(cluster.config),
                         cluster.task, std::move(settings)));
}

ExternalWorker::ExternalWorker(ExternalWorkerOptions options,
                               ClusterConfig config, TaskId task,
                               SessionTaskConfig settings)
    : options_(std::move(options)),
      config_(std::move(config)),
      task_(task),
      settings_(std::move(settings)) {}

ExternalWorker::~ExternalWorker() {
  // A Leave that has not come (an exception, a program that ended without
  // close): tried once, not for minutes while no server answers.
  wait_stop_.Stop();
  if (session_ != nullptr && !run_->left()) session_->Leave().IgnoreError();
}

const ClusterWorkerResult& ExternalWorker::result() const {
  return run_ == nullptr ? empty_result_ : run_->result();
}

absl::Status ExternalWorker::CheckVariables(
    const std::vector<VariableSpec>& mine) {
  const std::string me = task_.ToString();
  if (config_.model().name() != kExternalModel) {
    ASSIGN_OR_RETURN(std::vector<VariableSpec> registry,
                     ModelVariables(config_.model().name()));
    // With batch norm's statistics on the servers, they follow the
    // variables (as the C++ worker places them, worker_config.cc).
    if (config_.model().batch_norm_statistics() != config::ModelConfig::LOCAL) {
      ASSIGN_OR_RETURN(const std::vector<VariableSpec> state,
                       ModelState(config_.model().name()));
      registry.insert(registry.end(), state.begin(), state.end());
    }
    return CompareVariables(
        mine, registry, me,
        absl::StrCat("model '", config_.model().name(), "' (the config's)"));
  }
  if (settings_.chief) return absl::OkStatus();  // the servers check
  ASSIGN_OR_RETURN(
      std::vector<VariableSpec> servers,
      ServerVariables(client_.get(),
                      absl::Now() + settings_.session.start_timeout,
                      &wait_stop_));
  return CompareVariables(mine, servers, me, "the servers' (the chief's)");
}

absl::Status ExternalWorker::Join(std::vector<ps::NamedTensorView> variables,
                                  int64_t total_batches,
                                  const std::vector<std::string>& statistics) {
  if (session_ != nullptr) {
    return absl::FailedPreconditionError("the worker has joined already");
  }
  if (variables.empty()) {
    return absl::InvalidArgumentError("the model has no variables");
  }
  if (total_batches < 0) {
    return absl::InvalidArgumentError("total_batches must not be negative");
  }
  variables_.clear();
  for (const ps::NamedTensorView& v : variables) {
    variables_.push_back({v.name, v.view.shape(), Initializer()});
  }
  RETURN_IF_ERROR(ValidateVariableSpecs(variables_));
  for (const std::string& name : statistics) {
    auto it =
        std::find_if(variables_.begin(), variables_.end(),
                     [&name](const VariableSpec& v) { return v.name == name; });
    if (it == variables_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("statistic '", name, "' is not among the variables"));
    }
    it->kind = VariableKind::kRunningStatistic;
  }
  // The statistics after the parameters (worker/session/step_overlap.h).
  parameters_ = 0;
  while (parameters_ < variables_.size() &&
         variables_[parameters_].kind == VariableKind::kParameter) {
    ++parameters_;
  }
  for (size_t i = parameters_; i < variables_.size(); ++i) {
    if (variables_[i].kind == VariableKind::kParameter) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", variables_[i].name,
          "' comes after running statistic '", variables_[parameters_].name,
          "': the statistics go after the parameters"));
    }
  }
  ps::RemoteClientOptions client_options = settings_.client;
  client_options.variables = variables_;
  // A model of the registry is checked before any connection. A worker
  // whose variables are refused tells the servers why, so that the chief
  // ends the job at once (ReportWorkerFailure).
  const std::string task = task_.ToString();
  if (config_.model().name() != kExternalModel) {
    absl::Status checked = CheckVariables(variables_);
    ReportWorkerFailure(nullptr, client_options, task, checked);
    RETURN_IF_ERROR(checked);
  }
  RETURN_IF_ERROR(CheckPsAddressesResolve(config_));
  ASSIGN_OR_RETURN(run_dir_,
                   OpenRunDir(options_.run_dir, options_.config_path, config_,
                              settings_.chief, settings_.session.start_timeout,
                              &client_options, &client_, &wait_stop_));
  {
    MutexLock lock(&interrupt_mu_);
    interruptible_ = client_.get();
    if (pulls_interrupted_) client_->InterruptPulls();
  }
  if (wait_stop_.stopped()) return StoppedWaiting("joining the cluster");
  if (config_.model().name() == kExternalModel) {
    absl::Status checked = CheckVariables(variables_);
    ReportWorkerFailure(client_.get(), client_options, task, checked);
    RETURN_IF_ERROR(checked);
  }
  RETURN_IF_ERROR(OpenOutputs(total_batches));
  std::vector<ps::NamedConstTensorView> initial;
  for (const ps::NamedTensorView& v : variables) {
    initial.push_back({v.name, ConstTensorView(v.view.data(), v.view.shape())});
  }
  SessionOptions session_options = settings_.session;
  session_options.job_end_marker = outputs_->job_end_marker();
  auto session = std::make_unique<WorkerSession>(
      client_.get(), variables_, std::move(variables), session_options);
  session->recovery().set_wait_stop(&wait_stop_);
  WorkerSession* const joining = session.get();
  const absl::Status started = run_->Start(std::move(session), initial);
  if (!started.ok()) {
    if (run_->chief() != nullptr && run_->chief()->ended_job()) {
      // The chief ended the job (workers failed to take part): the servers
      // are shut down. summary.json says why, and its appearance tells the
      // workers that wait for servers that will not come back (Recovery's
      // job end marker) that the job ended.
      run_->Leave().IgnoreError();  // no call: the servers are gone
      if (run_->Finish(started.ToString()).ok()) {
        absl::Status written =
            outputs_->WriteSummaries(config_, run_->result());
        if (!written.ok()) {
          spdlog::warn("writing the summaries: {}", written.ToString());
        }
      }
    } else if (wait_stop_.stopped()) {
      // A signal ended the start: out of the live set at once (tried once),
      // so that no step waits for this worker until its lease runs out.
      joining->Leave().IgnoreError();
    }
    return started;
  }
  session_ = joining;
  if (settings_.session.overlap) {
    overlap_ = std::make_unique<StepOverlap>(
        session_, static_cast<int>(parameters_),
        [this] { return !run_->StopReason(session_->version()).empty(); },
        task_.ToString());
  }
  return absl::OkStatus();
}

absl::Status ExternalWorker::OpenOutputs(int64_t total_batches) {
  TaskOutputsOptions outputs_options;
  outputs_options.run_dir = run_dir_;
  outputs_options.task = task_;
  outputs_options.chief = settings_.chief;
  outputs_options.record_samples = config_.data().record_samples();
  ASSIGN_OR_RETURN(outputs_, TaskOutputs::Open(std::move(outputs_options),
                                               client_.get(), nullptr));
  if (!outputs_->samples_file().empty()) {
    ASSIGN_OR_RETURN(samples_, SampleRecorder::Open(outputs_->samples_file()));
  }
  TaskRunOptions o;
  o.name = task_.ToString();
  o.ends.max_steps = settings_.max_steps;
  o.ends.max_seconds = absl::ToDoubleSeconds(settings_.max_time);
  o.ends.total_batches = total_batches;
  o.log_every = options_.log_every;
  o.chief = settings_.chief;
  o.chief_options = settings_.chief_options;
  o.stragglers = settings_.stragglers;
  RunCallbacks callbacks;
  callbacks.on_step = [this](const StepRecord& r) {
    return outputs_->WriteStep(r);
  };
  callbacks.on_eval = [this](const EvalRecord& e) {
    return outputs_->WriteEval(e);
  };
  run_ = std::make_unique<TaskRun>(std::move(o), std::move(callbacks));
  return absl::OkStatus();
}

namespace {

// INVALID_ARGUMENT unless `gradient` has `variable`'s shape.
absl::Status CheckShape(const ps::NamedConstTensorView& gradient,
                        const VariableSpec& variable) {
  if (gradient.view.shape() == variable.shape) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("gradient '", gradient.name, "' has shape ",
                   ShapeToString(gradient.view.shape()),
                   ", the variable has shape ", ShapeToString(variable.shape)));
}

}  // namespace

absl::Status ExternalWorker::CheckJoined() const {
  if (session_ == nullptr) {
    return absl::FailedPreconditionError("the worker has not joined (join)");
  }
  if (run_->left()) {
    return absl::FailedPreconditionError("the worker has left");
  }
  return absl::OkStatus();
}

int64_t ExternalWorker::step() const {
  // The chief's: the newest.
  if (run_ != nullptr && run_->left()) return run_->result().final_global_step;
  return session_ == nullptr ? 0 : GlobalStep(session_->version());
}

double ExternalWorker::learning_rate() const {
  const config::TrainingConfig& t = config_.training();
  return t.optimizer().learning_rate() *
         LrFactor(LrScheduleFromConfig(t), step() + 1);
}

int64_t ExternalWorker::generation() const {
  return session_ == nullptr ? 0 : session_->version().generation;
}

std::string ExternalWorker::StopReason() const {
  if (session_ == nullptr) return "";
  return run_->StopReason(session_->ahead_version());
}

absl::Status ExternalWorker::CheckGradients(
    int64_t step, absl::Span<const ps::NamedConstTensorView> gradients) const {
  RETURN_IF_ERROR(CheckJoined());
  if (step != GlobalStep(session_->version())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradients computed at step ", step, ", but the weights are at step ",
        GlobalStep(session_->version()), ": compute them again"));
  }
  if (gradients.size() != variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        gradients.size(), " gradients for ", variables_.size(), " variables"));
  }
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (gradients[i].name != variables_[i].name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient ", i, " is '", gradients[i].name, "', expected '",
          variables_[i].name, "' (the variables' order)"));
    }
    RETURN_IF_ERROR(CheckShape(gradients[i], variables_[i]));
  }
  return absl::OkStatus();
}

absl::StatusOr<PushOutcome> ExternalWorker::Push(
    int64_t step, absl::Span<const ps::NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckGradients(step, gradients));
  InjectBeforePush();
  ASSIGN_OR_RETURN(last_push_, session_->Push(gradients));
  pushed_ = true;
  RETURN_IF_ERROR(RecordSamples(step));
  return last_push_;
}

absl::Status ExternalWorker::CheckOverlap() const {
  RETURN_IF_ERROR(CheckJoined());
  if (overlap_ == nullptr) {
    return absl::FailedPreconditionError(
        "a step in parts needs wire { overlap: true } in the config");
  }
  return absl::OkStatus();
}

absl::StatusOr<StepOverlap::State> ExternalWorker::BeginStep() {
  RETURN_IF_ERROR(CheckOverlap());
  return overlap_->Begin();
}

absl::StatusOr<StepOverlap::State> ExternalWorker::AwaitWeights(int v) {
  RETURN_IF_ERROR(CheckOverlap());
  return overlap_->AwaitWeights(v);
}

absl::StatusOr<StepOverlap::State> ExternalWorker::ForwardDone() {
  RETURN_IF_ERROR(CheckOverlap());
  return overlap_->ForwardDone();
}

absl::Status ExternalWorker::AddPart(ps::NamedConstTensorView gradient) {
  RETURN_IF_ERROR(CheckOverlap());
  for (size_t v = 0; v < variables_.size(); ++v) {
    if (variables_[v].name != gradient.name) continue;
    RETURN_IF_ERROR(CheckShape(gradient, variables_[v]));
    if (v >= parameters_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", gradient.name,
          "' is a running statistic: its batch statistic goes with "
          "finish_parts"));
    }
    overlap_->GradientReady(static_cast<int>(v), std::move(gradient));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no variable '", gradient.name, "'"));
}

absl::StatusOr<PushOutcome> ExternalWorker::FinishParts(
    int64_t step, absl::Span<const ps::NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckOverlap());
  RETURN_IF_ERROR(CheckGradients(step, gradients));
  InjectBeforePush();
  ASSIGN_OR_RETURN(last_push_, overlap_->Finish(gradients));
  pushed_ = true;
  RETURN_IF_ERROR(RecordSamples(step));
  return last_push_;
}

void ExternalWorker::InjectBeforePush() {
  // The caller computed since its weights came (or since it joined).
  run_->InjectAfterCompute(absl::Now() - weights_at_);
  run_->InjectTransfer();
}

absl::Status ExternalWorker::Pull() {
  RETURN_IF_ERROR(CheckJoined());
  absl::Status pulled;
  if (pushed_) {
    pushed_ = false;
    pulled = session_->PullAfterPush(last_push_);
  } else {
    pulled = session_->PullLatest().status();
  }
  if (pulled.ok()) run_->InjectTransfer();
  weights_at_ = absl::Now();
  return pulled;
}

bool ExternalWorker::pulls_in_flight() const {
  return session_ != nullptr && session_->pulls_in_flight();
}

void ExternalWorker::InterruptPulls() {
  MutexLock lock(&interrupt_mu_);
  pulls_interrupted_ = true;
  if (interruptible_ != nullptr) interruptible_->InterruptPulls();
}

void ExternalWorker::ResumePulls() {
  MutexLock lock(&interrupt_mu_);
  pulls_interrupted_ = false;
  if (interruptible_ != nullptr) interruptible_->ResumePulls();
}

void ExternalWorker::Interrupt() {
  wait_stop_.Stop();
  InterruptPulls();
}

absl::Status ExternalWorker::SettlePulls() {
  RETURN_IF_ERROR(CheckJoined());
  return session_->SettlePulls();
}

absl::StatusOr<ps::DataChunk> ExternalWorker::LeaseData(
    const std::function<bool()>& keep_waiting) {
  RETURN_IF_ERROR(CheckJoined());
  absl::StatusOr<ps::DataChunk> chunk = session_->LeaseData(keep_waiting);
  if (chunk.ok() && samples_ != nullptr) {
    // As many as a worker may hold (ParameterShard::kMaxLeasesPerWorker); a
    // chunk given back or lost is never recorded.
    constexpr size_t kMostHeld = 64;
    if (leased_samples_.size() >= kMostHeld) {
      leased_samples_.erase(leased_samples_.begin());
    }
    leased_samples_[{chunk->epoch, chunk->index}] =
        Leased{chunk->generation, chunk->samples};
  }
  return chunk;
}

void ExternalWorker::SetSamples(std::vector<int64_t> samples) {
  batch_samples_ = std::move(samples);
}

absl::Status ExternalWorker::RecordSamples(int64_t step) {
  std::optional<std::vector<int64_t>> samples = std::move(batch_samples_);
  batch_samples_.reset();
  const std::optional<ps::DataChunkRef>& chunk = session_->chunk();
  // Without a chunk the worker reads data of its own.
  if (samples_ == nullptr || !chunk.has_value()) return absl::OkStatus();
  SampleRecord r;
  r.worker = task_.index;
  r.step = step;
  r.generation = ps::DataQueue::LeaseGeneration(chunk->lease);
  r.epoch = chunk->epoch;
  r.index = chunk->index;
  r.outcome = last_push_.outcome;
  auto leased = leased_samples_.find({chunk->epoch, chunk->index});
  if (samples.has_value()) {
    r.samples = *std::move(samples);
  } else if (leased != leased_samples_.end()) {
    r.samples = leased->second.samples;
  }
  if (leased != leased_samples_.end()) leased_samples_.erase(leased);
  return samples_->Write(r);
}

absl::Status ExternalWorker::UseChunk(const ps::DataChunkRef& chunk) {
  RETURN_IF_ERROR(CheckJoined());
  session_->UseChunk(chunk);
  return absl::OkStatus();
}

absl::StatusOr<TaskRun::Next> ExternalWorker::BeforeStep() {
  RETURN_IF_ERROR(CheckJoined());
  return run_->BeforeStep();
}

bool ExternalWorker::EvalDue() const {
  return session_ != nullptr && run_->EvalDue();
}

void ExternalWorker::Evaluated() {
  if (session_ != nullptr) run_->Evaluated(GlobalStep(session_->version()));
}

absl::Status ExternalWorker::MaybeRequestCheckpoint() {
  if (session_ == nullptr) return absl::OkStatus();
  return run_->ChiefDuties();
}

absl::Status ExternalWorker::RecordStep(const StepStats& stats,
                                        const StepTimings& timings) {
  RETURN_IF_ERROR(CheckJoined());
  StepRecord r;
  r.global_step = stats.global_step;
  r.epoch = stats.epoch;
  r.batch_size = stats.batch_size;
  r.loss = stats.loss;
  r.cross_entropy = stats.loss;
  r.train_accuracy = stats.train_accuracy;
  r.outcome = last_push_.outcome;
  r.staleness = last_push_.staleness;
  r.replicas_to_aggregate = last_push_.replicas_to_aggregate;
  return run_->RecordStep(&r, timings, stats.batches_done);
}

absl::Status ExternalWorker::RecordEval(EvalRecord record) {
  if (session_ == nullptr) return CheckJoined();
  return run_->RecordEval(std::move(record));
}

absl::StatusOr<std::vector<ps::ShardStatus>> ExternalWorker::Status() {
  if (session_ == nullptr) return CheckJoined();
  return session_->Status();
}

absl::Status ExternalWorker::KeepLease(bool on) {
  RETURN_IF_ERROR(CheckJoined());
  if (run_->left()) {
    return absl::FailedPreconditionError(
        "the worker has left: no lease to keep");
  }
  if (!on) {
    computing_.reset();
  } else if (computing_ == nullptr) {
    computing_ = std::make_unique<LeaseKeeper::Hold>(session_->lease_keeper());
  }
  return absl::OkStatus();
}

absl::Status ExternalWorker::Leave(bool wait_for_others) {
  RETURN_IF_ERROR(CheckJoined());
  computing_.reset();  // a renewal after the Leave would join again
  // The chunks leased and never pushed (a DataLoader's prefetch, a step the
  // run stopped before): the Leave gives them back.
  absl::Status recorded = absl::OkStatus();
  if (samples_ != nullptr && !run_->left()) {
    for (auto& [chunk, leased] : leased_samples_) {
      SampleRecord r;
      r.worker = task_.index;
      r.step = GlobalStep(session_->version());
      r.generation = leased.generation;
      r.epoch = chunk.first;
      r.index = chunk.second;
      r.pushed = false;
      r.samples = std::move(leased.samples);
      if (recorded.ok()) recorded = samples_->Write(r);
    }
    leased_samples_.clear();
  }
  absl::Status left = run_->Leave(wait_for_others);
  RETURN_IF_ERROR(recorded);
  return left;
}

absl::Status ExternalWorker::Finish(const std::string& end_reason) {
  if (session_ == nullptr || !run_->left()) {
    return absl::FailedPreconditionError("Finish comes after Leave");
  }
  RETURN_IF_ERROR(run_->Finish(end_reason));
  return outputs_->WriteSummaries(config_, run_->result());
}

}  // namespace psgd
