// What each push trained on (data { record_samples: true }; docs/PS.md,
// "The servers hand out the data"): a worker, C++ or psgd.torch, writes one
// JSON line per push to samples-worker-J.jsonl in the run directory,
//
//   {"worker":W,"step":S,"generation":G,"epoch":E,"index":I,
//    "outcome":"applied","samples":[ids...]}
//
// W: the worker; S: the global step the gradient was computed at (the
// step it was pushed for); G: the generation of the data queue that leased
// the chunk (the ledger's "generation", ps/state/data_queue.h); E, I: the
// chunk; outcome: what the push's reply said (StepOutcomeName: "applied",
// "aggregated", "dropped_surplus", ...; an aggregated gradient counts once
// its step is applied, which the ledger tells); samples: the ids of the
// samples the batch fed the model, in the batch's order. A restarted worker
// appends to the file. scripts/ledger_check.py --records joins the lines
// with the servers' ledgers.
//
// A chunk the worker leased and never pushed (leased ahead, or leased for a
// step the run stopped before) has a line too when the worker leaves, its
// outcome "not_pushed" and S the global step then: the servers take it back
// at the Leave, and when the run stops at its step limit nobody trains it,
// so that its epoch stays open (docs/PS.md, "A run that stops at its step
// limit").
//
// Thread-safety: SampleRecorder::Write may be called from several threads.
#ifndef PSGD_WORKER_SESSION_SAMPLE_RECORDS_H_
#define PSGD_WORKER_SESSION_SAMPLE_RECORDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/metrics.h"
#include "worker/session/step_outcome.h"

namespace psgd {

struct SampleRecord {
  int worker = 0;
  int64_t step = 0;
  int64_t generation = 0;
  int64_t epoch = 0;
  int64_t index = 0;
  StepOutcome outcome = StepOutcome::kApplied;  // when pushed
  bool pushed = true;  // false: leased and never pushed ("not_pushed")
  std::vector<int64_t> samples;
};

// The outcome word of a record that was never pushed.
inline constexpr absl::string_view kNotPushedOutcome = "not_pushed";

// RUN_DIR/samples-worker-W.jsonl.
std::string SampleRecordsFile(absl::string_view run_dir, int worker);

// The line's object, its keys in the order above.
JsonObject SampleRecordJson(const SampleRecord& record);

class SampleRecorder {
 public:
  // Appends to `path` (MetricsWriter::Open's errors).
  static absl::StatusOr<std::unique_ptr<SampleRecorder>> Open(
      const std::string& path);
  // One line, flushed. INTERNAL naming the file on a write error.
  absl::Status Write(const SampleRecord& record);
  const std::string& path() const { return writer_->path(); }

 private:
  explicit SampleRecorder(std::unique_ptr<MetricsWriter> writer)
      : writer_(std::move(writer)) {}
  std::unique_ptr<MetricsWriter> writer_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_SAMPLE_RECORDS_H_
