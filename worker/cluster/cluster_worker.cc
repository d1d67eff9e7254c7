#include "worker/cluster/cluster_worker.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/models/initialize.h"
#include "worker/session/lease_keeper.h"
#include "worker/train/evaluate.h"

namespace psgd {
namespace {

std::vector<ps::NamedConstTensorView> ConstViews(const NamedTensors& tensors) {
  std::vector<ps::NamedConstTensorView> views;
  views.reserve(tensors.size());
  for (const auto& [name, t] : tensors) views.push_back({name, t.view()});
  return views;
}

}  // namespace

absl::Status ValidateClusterWorkerOptions(const ClusterWorkerOptions& o) {
  RETURN_IF_ERROR(ValidateSessionOptions(o));
  if (o.max_steps < 0 || o.eval_every < 0 || o.eval_examples < 0 ||
      o.log_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_steps (", o.max_steps, "), eval_every (", o.eval_every,
        "), eval_examples (", o.eval_examples, ") and log_every (", o.log_every,
        ") must not be negative"));
  }
  if (o.eval_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_batch is ", o.eval_batch, ", must be >= 1"));
  }
  if (o.max_time < absl::ZeroDuration() ||
      o.finish_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "max_time and finish_timeout must not be negative");
  }
  return absl::OkStatus();
}

ClusterWorker::ClusterWorker(ps::PsClient* client, Model* model, Batcher* train,
                             const ImageSet* test, ClusterWorkerOptions options,
                             ClusterWorkerCallbacks callbacks)
    : client_(client),
      model_(model),
      train_(train),
      test_(test),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      statistics_(model, {options_.statistics_on_servers,
                          options_.local_statistics_file,
                          options_.local_statistics_every, options_.worker_id,
                          options_.seed}) {}

ClusterWorker::~ClusterWorker() = default;

absl::StatusOr<ClusterWorkerResult> ClusterWorker::Run() {
  RETURN_IF_ERROR(ValidateClusterWorkerOptions(options_));
  RETURN_IF_ERROR(Start());
  for (;;) {
    ASSIGN_OR_RETURN(const bool go_on, BeforeStep());
    if (!go_on) break;
    ASSIGN_OR_RETURN(const bool stepped, Step());
    if (!stepped) break;
  }
  RETURN_IF_ERROR(Finish());
  return run_->result();
}

absl::Status ClusterWorker::Start() {
  TaskRunOptions o;
  o.name = absl::StrCat("worker:", options_.worker_id);
  o.ends.max_steps = options_.max_steps;
  o.ends.max_seconds = absl::ToDoubleSeconds(options_.max_time);
  o.ends.total_batches = train_->epochs() * train_->batches_per_epoch();
  o.log_every = options_.log_every;
  o.chief = options_.chief;
  o.chief_options = static_cast<const ChiefOptions&>(options_);
  o.stragglers = options_.stragglers;
  o.emulated = options_.emulated;
  run_ = std::make_unique<TaskRun>(std::move(o), callbacks_);
  weights_ = InitialValues(model_->variables(), options_.seed);
  std::vector<VariableSpec> variables = model_->variables();
  std::vector<ps::NamedTensorView> buffers;
  for (const VariableSpec& v : variables) {
    buffers.push_back({v.name, weights_.at(v.name).view()});
  }
  RETURN_IF_ERROR(statistics_.Prepare(&variables, &buffers));
  auto session = std::make_unique<WorkerSession>(client_, std::move(variables),
                                                 std::move(buffers), options_);
  std::vector<ps::NamedConstTensorView> initial;
  if (options_.chief) {
    initial = ConstViews(weights_);
    statistics_.AppendInitial(&initial);
  }
  RETURN_IF_ERROR(run_->Start(std::move(session), initial));
  if (!options_.samples_file.empty()) {
    ASSIGN_OR_RETURN(samples_, SampleRecorder::Open(options_.samples_file));
  }
  if (options_.overlap) {
    overlap_ = std::make_unique<StepOverlap>(
        this->session(), static_cast<int>(model_->variables().size()),
        [this] {
          return !run_->StopReason(this->session()->version()).empty();
        },
        absl::StrCat("worker ", options_.worker_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<Batch> ClusterWorker::NextBatch() {
  if (!options_.data_from_servers) return train_->Next();
  // The servers hand out the data: the batch of the chunk leased for this
  // step, which its push carries. The next step's chunk is leased while
  // this one computes (no call to shard 0 between steps).
  ASSIGN_OR_RETURN(const ps::DataChunk chunk, session()->LeaseData());
  session()->LeaseAhead();
  chunk_generation_ = chunk.generation;
  return train_->BatchOf(chunk.samples, chunk.epoch, chunk.index);
}

bool ClusterWorker::End(std::string reason) {
  end_reason_ = std::move(reason);
  return false;
}

absl::StatusOr<bool> ClusterWorker::BeforeStep() {
  ASSIGN_OR_RETURN(const TaskRun::Next next, run_->BeforeStep());
  if (!next.stop.empty()) return End(next.stop);
  if (next.evaluate) {
    const int64_t global_step = GlobalStep(session()->version());
    RETURN_IF_ERROR(Evaluate(global_step, /*final=*/false));
    run_->Evaluated(global_step);
  }
  return true;
}

absl::StatusOr<bool> ClusterWorker::Step() {
  StepTimings t;
  t.begin = absl::Now();
  absl::StatusOr<Batch> batch = NextBatch();
  if (absl::IsCancelled(batch.status())) return End(kServersShutDown);
  if (absl::IsOutOfRange(batch.status())) {
    return End("the data ended (epochs done)");
  }
  RETURN_IF_ERROR(batch.status());
  t.batch_ready = absl::Now();
  absl::StatusOr<std::optional<Computed>> c = ComputeAndPush(*batch);
  if (absl::IsCancelled(c.status())) return End(kServersShutDown);
  RETURN_IF_ERROR(c.status());
  if (!c->has_value()) {
    // The step stopped before its push: the chunk goes back at the Leave.
    if (options_.data_from_servers) {
      RETURN_IF_ERROR(RecordNotPushed(chunk_generation_, batch->epoch,
                                      batch->index, batch->examples));
    }
    return End(run_->StopReason(session()->version()));
  }
  const Computed& computed = **c;
  StepRecord rec;
  rec.global_step = GlobalStep(session()->version());
  if (samples_ != nullptr) {
    // What the push's gradient trained on: the batch's examples.
    SampleRecord s;
    s.worker = options_.worker_id;
    s.step = rec.global_step;
    s.generation = chunk_generation_;
    s.epoch = batch->epoch;
    s.index = batch->index;
    s.outcome = computed.pushed.outcome;
    s.samples = batch->examples;
    RETURN_IF_ERROR(samples_->Write(s));
  }
  t.computed = computed.computed;
  t.pushed = absl::Now();
  absl::Status pulled = session()->PullAfterPush(computed.pushed);
  if (absl::IsCancelled(pulled)) return End(kServersShutDown);
  RETURN_IF_ERROR(pulled);
  run_->InjectTransfer();
  t.pulled = absl::Now();
  RETURN_IF_ERROR(Record(&rec, computed, *batch, t));
  return true;
}

absl::StatusOr<std::optional<ClusterWorker::Computed>>
ClusterWorker::ComputeAndPush(const Batch& batch) {
  Computed c;
  const absl::Time begin = absl::Now();
  // A step's compute (and an emulated straggler's delay) may outlast the
  // servers' worker lease, at a large batch or on a busy machine: the
  // worker is alive and keeps its lease (lease_keeper.h). Without this a
  // cnn10 step of 2048 images on 2 loaded cores (more than 30 s) took the
  // worker out of the live set at every step, which it then computed again.
  std::optional<LeaseKeeper::Hold> computing;
  computing.emplace(session()->lease_keeper());
  if (overlap_ != nullptr) {
    // The model says when its forward reaches a variable and when its
    // backward has a gradient; the order is StepOverlap's.
    ASSIGN_OR_RETURN(StepOverlap::State state, overlap_->Begin());
    absl::StatusOr<StepResult> r;
    if (state == StepOverlap::State::kCompute) {
      StepHooks hooks;
      hooks.await_weights = [&](int v) -> absl::Status {
        ASSIGN_OR_RETURN(state, overlap_->AwaitWeights(v));
        if (state == StepOverlap::State::kCompute) return absl::OkStatus();
        return absl::AbortedError("the step ends before its push");
      };
      hooks.gradient_ready = [&](int v) {
        const std::string& name = model_->variables()[v].name;
        overlap_->GradientReady(v, {name, gradients_.at(name).view()});
      };
      r = model_->ComputeGradientsWithHooks(ViewsOf(weights_),
                                            batch.images.view(), batch.labels,
                                            &gradients_, hooks);
      state = overlap_->state();
    }
    if (state == StepOverlap::State::kStop) return std::nullopt;
    if (state == StepOverlap::State::kCompute) {
      RETURN_IF_ERROR(r.status());
      c.result = *r;
      RETURN_IF_ERROR(statistics_.TakeBatch());
      run_->InjectAfterCompute(absl::Now() - begin);
      c.computed = absl::Now();
      run_->InjectTransfer();
      ASSIGN_OR_RETURN(c.pushed, overlap_->Finish(PushViews()));
      return c;
    }
    // kRedo: the whole model was pulled again; the step is computed again
    // as without overlap.
  }
  ASSIGN_OR_RETURN(
      c.result, model_->ComputeGradients(ViewsOf(weights_), batch.images.view(),
                                         batch.labels, &gradients_));
  RETURN_IF_ERROR(statistics_.TakeBatch());
  run_->InjectAfterCompute(absl::Now() - begin);
  computing.reset();
  c.computed = absl::Now();
  run_->InjectTransfer();
  ASSIGN_OR_RETURN(c.pushed, session()->Push(PushViews()));
  return c;
}

std::vector<ps::NamedConstTensorView> ClusterWorker::PushViews() const {
  std::vector<ps::NamedConstTensorView> views = ConstViews(gradients_);
  statistics_.AppendPush(&views);
  return views;
}

absl::Status ClusterWorker::Record(StepRecord* rec, const Computed& c,
                                   const Batch& batch, const StepTimings& t) {
  rec->epoch = batch.epoch;
  rec->batch_size = c.result.examples;
  rec->loss = c.result.loss;
  rec->cross_entropy = c.result.cross_entropy;
  rec->train_accuracy = c.result.accuracy();
  rec->outcome = c.pushed.outcome;
  rec->staleness = c.pushed.staleness;
  rec->replicas_to_aggregate = c.pushed.replicas_to_aggregate;
  RETURN_IF_ERROR(run_->RecordStep(
      rec, t, batch.epoch * train_->batches_per_epoch() + batch.index + 1));
  return statistics_.AfterStep(run_->result().local_steps);
}

absl::Status ClusterWorker::Evaluate(int64_t global_step, bool final) {
  if (test_ == nullptr) return absl::OkStatus();
  const absl::Time t0 = absl::Now();
  // An evaluation during training may outlast the servers' worker lease:
  // the chief stays in the live set meanwhile. (The final one comes after
  // the chief has left.)
  absl::StatusOr<StepResult> evaluated;
  {
    LeaseKeeper::Hold keep(final ? nullptr : session()->lease_keeper());
    // Statistics on the servers: the pulled ones (the model's own follow
    // only this worker's batches); local ones: the model's own.
    RETURN_IF_ERROR(statistics_.BeforeEvaluation());
    evaluated =
        EvaluateTestSet(model_, *test_, ViewsOf(weights_), options_.eval_batch,
                        final ? 0 : options_.eval_examples);
  }
  ASSIGN_OR_RETURN(const StepResult r, std::move(evaluated));
  EvalRecord e;
  e.global_step = global_step;
  e.test_accuracy = r.accuracy();
  e.test_loss = r.loss;
  e.examples = r.examples;
  e.final = final;
  e.eval_s = absl::ToDoubleSeconds(absl::Now() - t0);
  return run_->RecordEval(e);
}

absl::Status ClusterWorker::RecordNotPushed(
    int64_t generation, int64_t epoch, int64_t index,
    const std::vector<int64_t>& samples) {
  if (samples_ == nullptr) return absl::OkStatus();
  SampleRecord s;
  s.worker = options_.worker_id;
  s.step = GlobalStep(session()->version());
  s.generation = generation;
  s.epoch = epoch;
  s.index = index;
  s.pushed = false;
  s.samples = samples;
  return samples_->Write(s);
}

absl::Status ClusterWorker::Finish() {
  // First the chunk leased ahead for a step that never came: the Leave
  // gives it back, and the worker's record says it was never pushed.
  absl::Status recorded = absl::OkStatus();
  if (options_.data_from_servers && session() != nullptr) {
    if (std::optional<ps::DataChunk> ahead = session()->TakeLeasedAhead()) {
      recorded = RecordNotPushed(ahead->generation, ahead->epoch, ahead->index,
                                 ahead->samples);
    }
  }
  // Then leave, so that no sync step waits for this worker (pulls still in
  // flight end first).
  absl::Status left = run_->Leave();
  RETURN_IF_ERROR(recorded);
  RETURN_IF_ERROR(statistics_.Save());
  RETURN_IF_ERROR(left);
  if (run_->chief() != nullptr && !run_->servers_gone()) {
    RETURN_IF_ERROR(Evaluate(run_->result().final_global_step, /*final=*/true));
  }
  return run_->Finish(end_reason_);
}

}  // namespace psgd
