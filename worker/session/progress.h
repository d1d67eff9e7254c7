// How far a run is, for progress lines: the fraction done by whichever of
// its ends comes first (the global step against max_steps, the time against
// the budget, this worker's batches against its epochs), and the time left
// at the pace so far.
//
// ProgressLog writes a worker loop's progress lines: the mean loss since
// the last line, images/s over the time in steps, the last step's phases,
// its outcome, the fraction done and the time left.
//
// Thread-safety: pure functions; a ProgressLog is thread-compatible.
#ifndef PSGD_WORKER_SESSION_PROGRESS_H_
#define PSGD_WORKER_SESSION_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "worker/session/records.h"

namespace psgd {

struct RunEnds {
  int64_t max_steps = 0;      // 0: no step limit
  double max_seconds = 0.0;   // 0: no time budget
  int64_t total_batches = 0;  // epochs x batches per epoch; 0: no end
};

// In [0, 1]; -1 when the run has no known end.
double FractionDone(const RunEnds& ends, int64_t global_step, double elapsed_s,
                    int64_t batches_done);

// Why a worker stops before computing from weights at `global_step`,
// `elapsed` after it started: "reached step N" (max_steps), "the time budget
// of 1m30s is spent" (max_seconds); "" to go on. (The data's end is the
// batcher's to tell.) Every worker program's rule: the C++ worker loop's
// and the Python one's.
std::string StopReason(const RunEnds& ends, int64_t global_step,
                       absl::Duration elapsed);

// "37.5% done, ETA 3m12s"; "" when the fraction is unknown (< 0) or zero.
std::string ProgressText(double fraction, double elapsed_s);

class ProgressLog {
 public:
  // A line every `every` local steps (0: never), towards `ends`.
  ProgressLog(int64_t every, RunEnds ends) : every_(every), ends_(ends) {}

  // A finished step, at `global_step` (the lowest shard step), after
  // `batches_done` of this worker's batches.
  void Add(const StepRecord& record, int64_t global_step, int64_t batches_done);

 private:
  const int64_t every_;
  const RunEnds ends_;
  double step_seconds_ = 0.0;  // since the start
  int64_t images_ = 0;
  double window_loss_ = 0.0;  // since the last line
  int64_t window_steps_ = 0;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_PROGRESS_H_
