// Stale-synchronous parallel (SSP) for async mode: a worker more than
// `bound` pushes ahead of the slowest live worker waits before it pulls,
// and so before it computes (docs/PS.md, "Bounded staleness").
//
// A worker's clock is the number of its gradients the shard applied in the
// current generation (every shard sees the same pushes, so every shard
// keeps the same clocks). A pull from worker w waits while
//   clock(w) > min over the other live workers v of clock(v) + bound.
// Pushes of the slow worker release it, and so does the slow worker
// leaving (a Leave, or its lease running out): a dead worker holds the
// others back for at most its lease. A worker that joins (or joins again)
// starts at least at the slowest other live worker's clock, so that a late
// or restarted worker does not hold the others back for pushes it never
// made. Pulls of no worker (id -1, the evaluator) never wait. After a
// restore or a rollback every clock is 0 again (Reset).
//
// Thread-safety: none; the shard calls it under its mutex.
#ifndef PSGD_PS_STATE_SSP_CLOCK_H_
#define PSGD_PS_STATE_SSP_CLOCK_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace psgd {
namespace ps {

class SspClock {
 public:
  // bound: -1 for none (no pull ever waits), else >= 0. Worker ids are
  // 0..num_workers-1.
  SspClock(int64_t bound, int num_workers)
      : bound_(bound), clocks_(static_cast<size_t>(num_workers), 0) {}

  bool enabled() const { return bound_ >= 0; }
  int64_t bound() const { return bound_; }

  // One more applied gradient of `worker`.
  void Tick(int worker) { ++clocks_[worker]; }
  // `worker` joins while `live` (ascending; it may or may not contain
  // `worker`) are live: its clock becomes at least the smallest clock of
  // the others.
  void Join(int worker, absl::Span<const int> live);
  // True when a pull of `worker` must wait while `live` are the live
  // workers. False for worker -1 and without a bound.
  bool MustWait(int worker, absl::Span<const int> live) const;

  int64_t clock(int worker) const { return clocks_[worker]; }
  // Every clock to 0 (a new generation: every worker re-syncs).
  void Reset();

 private:
  // The smallest clock of the live workers other than `worker`; -1 when
  // there is none.
  int64_t SlowestOther(int worker, absl::Span<const int> live) const;

  const int64_t bound_;
  std::vector<int64_t> clocks_;  // by worker id
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_SSP_CLOCK_H_
