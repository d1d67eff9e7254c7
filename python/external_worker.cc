#include "python/external_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_env.h"
#include "common/host_address.h"
#include "common/status_macros.h"
#include "python/model_check.h"
#include "spdlog/spdlog.h"
#include "worker/models/registry.h"
#include "worker/paths.h"
#include "worker/session/task_files.h"

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
      settings_(std::move(settings)),
      start_(absl::Now()) {}

ExternalWorker::~ExternalWorker() {
  if (session_ != nullptr && !left_ && !servers_gone_) {
    session_->Leave().IgnoreError();
  }
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
                      absl::Now() + settings_.session.start_timeout));
  return CompareVariables(mine, servers, me, "the servers' (the chief's)");
}

absl::Status ExternalWorker::Join(std::vector<ps::NamedTensorView> variables,
                                  int64_t total_batches) {
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
  ps::GrpcClientOptions client_options = settings_.client;
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
                              &client_options, &client_));
  if (config_.model().name() == kExternalModel) {
    absl::Status checked = CheckVariables(variables_);
    ReportWorkerFailure(client_.get(), client_options, task, checked);
    RETURN_IF_ERROR(checked);
  }
  RETURN_IF_ERROR(OpenSinks(total_batches));
  std::vector<ps::NamedConstTensorView> initial;
  for (const ps::NamedTensorView& v : variables) {
    initial.push_back({v.name, ConstTensorView(v.view.data(), v.view.shape())});
  }
  auto session = std::make_unique<WorkerSession>(
      client_.get(), variables_, std::move(variables), settings_.session);
  if (settings_.chief) {
    chief_ = std::make_unique<Chief>(session.get(), settings_.chief_options);
    RETURN_IF_ERROR(session->Initialize(initial));
  }
  absl::Status started = session->Start();
  // Workers that failed to take part (CheckWorkerFailures): the chief ends
  // the job.
  if (chief_ != nullptr && absl::IsFailedPrecondition(started)) {
    return chief_->EndJob(started);
  }
  RETURN_IF_ERROR(started);
  session_ = std::move(session);
  start_ = absl::Now();
  last_bytes_ = client_->payload_bytes();
  return absl::OkStatus();
}

absl::Status ExternalWorker::OpenSinks(int64_t total_batches) {
  const std::string prefix = absl::StrCat(run_dir_, "/worker-", task_.index);
  // A restarted worker adds to the lines of the one before.
  ASSIGN_OR_RETURN(jsonl_,
                   MetricsWriter::Open(prefix + ".jsonl", /*append=*/true));
  if (settings_.chief) {
    ASSIGN_OR_RETURN(
        events_, EventFileWriter::Create(run_dir_,
                                         absl::StrCat("worker-", task_.index)));
  }
  sinks_ = std::make_unique<MetricSinks>(task_.ToString(), jsonl_.get(),
                                         events_.get(), nullptr);
  RunEnds ends;
  ends.max_steps = settings_.max_steps;
  ends.max_seconds = absl::ToDoubleSeconds(settings_.max_time);
  ends.total_batches = total_batches;
  progress_ = std::make_unique<ProgressLog>(options_.log_every, ends);
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
  if (left_) return absl::FailedPreconditionError("the worker has left");
  return absl::OkStatus();
}

int64_t ExternalWorker::step() const {
  if (left_) return result_.final_global_step;  // the chief's: the newest
  return session_ == nullptr ? 0 : GlobalStep(session_->version());
}

int64_t ExternalWorker::generation() const {
  return session_ == nullptr ? 0 : session_->version().generation;
}

std::string ExternalWorker::StopReason() const {
  if (session_ == nullptr) return "";
  RunEnds ends;
  ends.max_steps = settings_.max_steps;
  ends.max_seconds = absl::ToDoubleSeconds(settings_.max_time);
  return psgd::StopReason(ends, GlobalStep(session_->ahead_version()),
                          absl::Now() - start_);
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
  ASSIGN_OR_RETURN(last_push_, session_->Push(gradients));
  pushed_ = true;
  return last_push_;
}

absl::Status ExternalWorker::AddPart(ps::NamedConstTensorView gradient) {
  RETURN_IF_ERROR(CheckJoined());
  if (!settings_.session.overlap) {
    return absl::FailedPreconditionError(
        "pushes in parts need wire { overlap: true } in the config");
  }
  for (const VariableSpec& v : variables_) {
    if (v.name != gradient.name) continue;
    RETURN_IF_ERROR(CheckShape(gradient, v));
    session_->AddPart(std::move(gradient));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no variable '", gradient.name, "'"));
}

absl::StatusOr<PushOutcome> ExternalWorker::FinishParts(
    int64_t step, absl::Span<const ps::NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckGradients(step, gradients));
  ASSIGN_OR_RETURN(last_push_, session_->FinishParts(gradients));
  pushed_ = true;
  return last_push_;
}

absl::Status ExternalWorker::Pull() {
  RETURN_IF_ERROR(CheckJoined());
  if (pushed_) {
    pushed_ = false;
    return session_->PullAfterPush(last_push_);
  }
  return session_->PullLatest().status();
}

absl::Status ExternalWorker::AwaitWeights(int v) {
  RETURN_IF_ERROR(CheckJoined());
  if (v < 0 || v >= static_cast<int>(variables_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable index ", v, " out of range [0, ", variables_.size(), ")"));
  }
  absl::Status s = session_->AwaitWeights(v);
  if (s.ok() || absl::IsCancelled(s)) return s;
  spdlog::info(
      "{}: the pulls of the variables' groups gave no common step ({}); "
      "pulling the whole model",
      task_.ToString(), s.ToString());
  return session_->PullWholeAfterGroups();
}

bool ExternalWorker::pulls_in_flight() const {
  return session_ != nullptr && session_->pulls_in_flight();
}

absl::Status ExternalWorker::SettlePulls() {
  RETURN_IF_ERROR(CheckJoined());
  return session_->SettlePulls();
}

bool ExternalWorker::EvalDue() const {
  return chief_ != nullptr && chief_->EvalDue(session_->version());
}

void ExternalWorker::Evaluated() {
  if (chief_ != nullptr) chief_->Evaluated(GlobalStep(session_->version()));
}

absl::Status ExternalWorker::MaybeRequestCheckpoint() {
  if (chief_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(chief_->CheckWorkers());
  chief_->MaybeRequestCheckpoint(session_->ahead_version());
  return absl::OkStatus();
}

absl::Status ExternalWorker::RecordStep(const StepStats& stats,
                                        const StepTimings& timings) {
  RETURN_IF_ERROR(CheckJoined());
  StepRecord r;
  r.local_step = ++result_.local_steps;
  r.global_step = stats.global_step;
  r.epoch = stats.epoch;
  r.batch_size = stats.batch_size;
  r.loss = stats.loss;
  r.cross_entropy = stats.loss;
  r.train_accuracy = stats.train_accuracy;
  r.outcome = last_push_.outcome;
  r.staleness = last_push_.staleness;
  timings.Fill(session_->version().server_wait, start_, &r);
  result_.outcomes[r.outcome]++;
  step_seconds_ += r.step_s;
  images_ += stats.batch_size;
  const ps::GrpcPsClient::PayloadBytes now = client_->payload_bytes();
  StepContext c;
  c.sent_bytes = now.sent - last_bytes_.sent;
  c.received_bytes = now.received - last_bytes_.received;
  last_bytes_ = now;
  RETURN_IF_ERROR(sinks_->WriteStep(r, c));
  progress_->Add(r, GlobalStep(session_->version()), stats.batches_done);
  return absl::OkStatus();
}

absl::Status ExternalWorker::RecordEval(EvalRecord record) {
  if (session_ == nullptr) return CheckJoined();
  record.wall_time_s = absl::ToDoubleSeconds(absl::Now() - start_);
  spdlog::info("step {}: test accuracy {:.4f}, test loss {:.4f} ({} images{})",
               record.global_step, record.test_accuracy, record.test_loss,
               record.examples, record.final ? ", final" : "");
  result_.evals.push_back(record);
  return sinks_->WriteEval(record);
}

absl::StatusOr<std::vector<ps::ShardStatus>> ExternalWorker::Status() {
  if (session_ == nullptr) return CheckJoined();
  return session_->Status();
}

absl::Status ExternalWorker::Leave() {
  RETURN_IF_ERROR(CheckJoined());
  left_ = true;
  absl::Status left = session_->Leave();
  result_.final_global_step = GlobalStep(session_->version());
  servers_gone_ = absl::IsCancelled(left);
  if (!left.ok() && !servers_gone_) return left;
  if (chief_ == nullptr || servers_gone_) return absl::OkStatus();
  RETURN_IF_ERROR(chief_->AwaitOthersLeft());
  // The final weights, without waiting for a step.
  ASSIGN_OR_RETURN(latest_, session_->PullLatest());
  result_.final_global_step = GlobalStep(latest_);
  return absl::OkStatus();
}

absl::Status ExternalWorker::Finish(const std::string& end_reason) {
  if (session_ == nullptr || !left_) {
    return absl::FailedPreconditionError("Finish comes after Leave");
  }
  result_.end_reason = end_reason;
  spdlog::info("{} stops after {} steps: {}", task_.ToString(),
               result_.local_steps, end_reason);
  if (chief_ != nullptr && !servers_gone_) {
    ASSIGN_OR_RETURN(result_.server_status, chief_->ShutDownServers(latest_));
  }
  result_.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  result_.images_per_s = step_seconds_ > 0 ? images_ / step_seconds_ : 0.0;
  result_.recoveries = session_->recovery().recoveries();
  result_.unaligned_steps = session_->unaligned_steps();
  const std::string task = task_.ToString();
  RETURN_IF_ERROR(WriteJsonFile(
      absl::StrCat(run_dir_, "/worker-", task_.index, ".summary.json"),
      WorkerSummary(task, result_)));
  if (chief_ != nullptr) {
    RETURN_IF_ERROR(WriteJsonFile(run_dir_ + "/summary.json",
                                  RunSummary(config_, result_)));
  }
  return absl::OkStatus();
}

}  // namespace psgd
