#include "worker/session/sample_records.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psgd {

std::string SampleRecordsFile(absl::string_view run_dir, int worker) {
  return absl::StrCat(run_dir, "/samples-worker-", worker, ".jsonl");
}

JsonObject SampleRecordJson(const SampleRecord& r) {
  JsonObject o;
  o.Set("worker", r.worker)
      .Set("step", r.step)
      .Set("generation", r.generation)
      .Set("epoch", r.epoch)
      .Set("index", r.index)
      .Set("outcome", r.pushed ? StepOutcomeName(r.outcome) : kNotPushedOutcome)
      .SetArray("samples", r.samples);
  return o;
}

absl::StatusOr<std::unique_ptr<SampleRecorder>> SampleRecorder::Open(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<MetricsWriter>> writer =
      MetricsWriter::Open(path, /*append=*/true);
  if (!writer.ok()) return writer.status();
  return std::unique_ptr<SampleRecorder>(
      new SampleRecorder(*std::move(writer)));
}

absl::Status SampleRecorder::Write(const SampleRecord& record) {
  return writer_->Write(SampleRecordJson(record));
}

}  // namespace psgd
