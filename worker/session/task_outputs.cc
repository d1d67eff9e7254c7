#include "worker/session/task_outputs.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/session/sample_records.h"
#include "worker/session/task_files.h"

namespace psgd {

absl::StatusOr<std::unique_ptr<TaskOutputs>> TaskOutputs::Open(
    TaskOutputsOptions options, const ps::RemotePsClient* client,
    WorkerMetrics* prometheus) {
  const std::string name = absl::StrCat("worker-", options.task.index);
  // A restarted worker adds to the lines of the one before.
  ASSIGN_OR_RETURN(
      std::unique_ptr<MetricsWriter> jsonl,
      MetricsWriter::Open(absl::StrCat(options.run_dir, "/", name, ".jsonl"),
                          /*append=*/true));
  // The chief's TensorBoard scalars (tensorboard --logdir RUN_DIR).
  std::unique_ptr<EventFileWriter> events;
  if (options.chief) {
    ASSIGN_OR_RETURN(events, EventFileWriter::Create(options.run_dir, name));
  }
  return std::unique_ptr<TaskOutputs>(
      new TaskOutputs(std::move(options), client, std::move(jsonl),
                      std::move(events), prometheus));
}

TaskOutputs::TaskOutputs(TaskOutputsOptions options,
                         const ps::RemotePsClient* client,
                         std::unique_ptr<MetricsWriter> jsonl,
                         std::unique_ptr<EventFileWriter> events,
                         WorkerMetrics* prometheus)
    : options_(std::move(options)),
      client_(client),
      jsonl_(std::move(jsonl)),
      events_(std::move(events)),
      sinks_(options_.task.ToString(), jsonl_.get(), events_.get(),
             prometheus) {
  if (client_ != nullptr) last_bytes_ = client_->payload_bytes();
}

std::string TaskOutputs::Prefix() const {
  return absl::StrCat(options_.run_dir, "/worker-", options_.task.index);
}

std::string TaskOutputs::samples_file() const {
  if (!options_.record_samples) return "";
  return SampleRecordsFile(options_.run_dir, options_.task.index);
}

std::string TaskOutputs::local_statistics_file() const {
  return Prefix() + ".batch_norm";
}

std::string TaskOutputs::job_end_marker() const {
  return RunSummaryPath(options_.run_dir);
}

absl::Status TaskOutputs::WriteStep(const StepRecord& record) {
  // The payload of the step's pushes and pulls (what crossed the network
  // for this worker).
  StepContext c;
  if (client_ != nullptr) {
    const ps::RemotePsClient::PayloadBytes now = client_->payload_bytes();
    c.sent_bytes = now.sent - last_bytes_.sent;
    c.received_bytes = now.received - last_bytes_.received;
    last_bytes_ = now;
  }
  c.train_examples = options_.train_examples;
  return sinks_.WriteStep(record, c);
}

absl::Status TaskOutputs::WriteEval(const EvalRecord& record) {
  return sinks_.WriteEval(record);
}

absl::Status TaskOutputs::WriteSummaries(const ClusterConfig& config,
                                         const ClusterWorkerResult& result) {
  JsonObject summary = WorkerSummary(options_.task.ToString(), result);
  if (client_ != nullptr) {
    // What went over the UCX data plane (wire { data_plane: UCX }).
    const ps::RemotePsClient::PayloadBytes bytes = client_->payload_bytes();
    summary.Set("ucx_sent_bytes", bytes.ucx_sent)
        .Set("ucx_received_bytes", bytes.ucx_received);
  }
  RETURN_IF_ERROR(WriteJsonFile(Prefix() + ".summary.json", summary));
  if (options_.chief) {
    RETURN_IF_ERROR(
        WriteJsonFile(job_end_marker(), RunSummary(config, result)));
  }
  return absl::OkStatus();
}

}  // namespace psgd
