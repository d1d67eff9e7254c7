// Adaptive backup workers: a sync shard's N of M chosen step by step from
// the arrival times it observes, in the spirit of Dynamic Backup Workers
// (Xiong et al., arXiv 2004.14696), which no parameter server of the field
// ships. docs/PS.md, "Adaptive backup workers".
//
// The rule. Every push that reaches the shard (aggregated, surplus or
// stale) is filed under the step its gradient was computed from, with its
// offset d = arrival time - the time that step's weights were published.
// When step k completes, N for step k + 1 is chosen:
//   * while fewer than `warmup` steps have completed, N = n_max;
//   * else, over the last `window` completed steps s (k included), for each
//     n in [n_min, n_max], T(n) = the mean of the n-th smallest offset filed
//     under s, where a step with fewer than n offsets so far counts as
//     (now - its publish time), a lower bound of its n-th arrival; N is the
//     n that maximises n / T(n), the gradients the step would average per
//     second (ties: the larger n; T(n) = 0 counts as the best).
// So a worker that is persistently slow, or stalled, stops holding the
// steps back once the window has seen it, and comes back into N when it
// keeps up again. The rule is scripts/experiments/step_time_model.py's
// `choose_n`, which the step-time model simulates with.
//
// With several shards shard 0 chooses, from the pushes it decides, and
// sends each step's choice to the others with the step's decision
// (Decision::replicas_next): every shard holds the same N. The choice is
// recorded per push (PushReply::replicas_to_aggregate).
//
// Thread-safety: none; the shard calls it under its mutex.
#ifndef PSGD_PS_STATE_ADAPTIVE_BACKUPS_H_
#define PSGD_PS_STATE_ADAPTIVE_BACKUPS_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psgd {
namespace ps {

struct AdaptiveBackupOptions {
  int n_min = 1;
  int n_max = 1;
  int window = 20;  // completed steps the choice looks at
  int warmup = 5;   // completed steps before the first choice
};

// INVALID_ARGUMENT naming the field: 1 <= n_min <= n_max <= workers,
// window >= 1, warmup >= 0.
absl::Status ValidateAdaptiveBackupOptions(const AdaptiveBackupOptions& o,
                                           int workers);

class AdaptiveBackups {
 public:
  explicit AdaptiveBackups(AdaptiveBackupOptions options);

  // Step `step`'s weights were published at `at` (the shard's
  // initialisation, a completed step, a restore).
  void Published(int64_t step, absl::Time at);
  // A push computed from step `step` arrived at `at`. Ignored for a step
  // not in the window (older, or before any Published).
  void Arrived(int64_t step, absl::Time at);
  // Step `step` completed at `now`: returns N for step + 1 (and the step's
  // next Published is `now`'s caller's to make).
  int Completed(int64_t step, absl::Time now);

  // N for the current step.
  int n() const { return n_; }
  // The n / T(n) of each n in [n_min, n_max] at the last choice (empty
  // during the warm-up), for logs and tests.
  const std::vector<double>& last_rates() const { return rates_; }

 private:
  struct StepArrivals {
    int64_t step = 0;
    absl::Time published;
    std::vector<absl::Duration> offsets;  // in arrival order
    bool completed = false;
  };
  StepArrivals* Find(int64_t step);

  const AdaptiveBackupOptions options_;
  std::deque<StepArrivals> steps_;  // ascending; the window and the current
  int64_t completed_ = 0;
  int n_;
  std::vector<double> rates_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_ADAPTIVE_BACKUPS_H_
