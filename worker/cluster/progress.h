// How far a run is, for progress lines: the fraction done by whichever of
// its ends comes first (the global step against max_steps, the time against
// the budget, this worker's batches against its epochs), and the time left
// at the pace so far.
//
// Thread-safety: pure functions.
#ifndef PSGD_WORKER_CLUSTER_PROGRESS_H_
#define PSGD_WORKER_CLUSTER_PROGRESS_H_

#include <cstdint>
#include <string>

namespace psgd {

struct RunEnds {
  int64_t max_steps = 0;     // 0: no step limit
  double max_seconds = 0.0;  // 0: no time budget
  int64_t total_batches = 0;  // epochs x batches per epoch; 0: no end
};

// In [0, 1]; -1 when the run has no known end.
double FractionDone(const RunEnds& ends, int64_t global_step,
                    double elapsed_s, int64_t batches_done);

// "37.5% done, ETA 3m12s"; "" when the fraction is unknown (< 0) or zero.
std::string ProgressText(double fraction, double elapsed_s);

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_PROGRESS_H_
