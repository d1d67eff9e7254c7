// A shard's waiting pulls (docs/PS.md, "Pulls"): the pulls it holds until
// their step comes or, in async mode with a staleness bound, until the
// worker is within the bound of the slowest other live worker (the SSP
// clock, ps/state/ssp_clock.h, which this room keeps), and how long the
// bound held pulls back. ParameterShard checks a pull (open, generation,
// worker id) and answers it; what waits, and for what, is here.
//
// The room answers nothing itself: Release and EndAll move a pull's callback
// with its answer into the shard's list of pulls to answer, which the shard
// runs after its lock (pull callbacks never run under the shard's mutex).
//
// Thread-safety: none; the shard calls it under its mutex.
#ifndef PSGD_PS_SHARD_WAITING_PULLS_H_
#define PSGD_PS_SHARD_WAITING_PULLS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ps/state/membership.h"
#include "ps/state/ssp_clock.h"
#include "ps/state/types.h"
#include "ps/state/variable_store.h"

namespace psgd {
namespace ps {

class WaitingPulls {
 public:
  using Snapshot = std::shared_ptr<const WeightsSnapshot>;
  using PullDone = std::function<void(absl::StatusOr<Snapshot>)>;
  // Pulls to answer after the shard's lock: each callback with its answer.
  using Ready = std::vector<std::pair<PullDone, absl::StatusOr<Snapshot>>>;

  // `staleness_bound`: how many pushes a worker may be ahead of the slowest
  // other live worker before its pulls wait (-1: pulls never wait for
  // that; sync mode passes -1). Worker ids are 0..num_workers-1, or -1 for
  // a pull of no worker (the evaluator), which the bound never holds.
  WaitingPulls(int64_t staleness_bound, int num_workers);
  WaitingPulls(const WaitingPulls&) = delete;
  WaitingPulls& operator=(const WaitingPulls&) = delete;

  // The staleness bound's clock (SspClock): one applied gradient of
  // `worker`; `worker` joins while `live` are live; every clock to 0.
  void Tick(int worker) { clock_.Tick(worker); }
  void Join(int worker, absl::Span<const int> live) {
    clock_.Join(worker, live);
  }
  void ResetClocks() { clock_.Reset(); }
  bool bounded() const { return clock_.enabled(); }
  // True when the bound holds a pull of `worker_id` back while `members`'
  // live workers are live.
  bool BoundHolds(int worker_id, const Membership& members) const;

  // Holds a pull for weights of step >= min_step of `worker_id` until
  // Release finds it ready; `bound_held`: the bound holds it now (it is
  // counted, and the time until its release is added up). Returns its
  // ticket, never 0.
  uint64_t Hold(int64_t min_step, int worker_id, PullDone done, bool bound_held,
                absl::Time now);
  // Withdraws a held pull: true when it was held (its callback will never
  // run), false when it is not (answered, ended, or an unknown ticket).
  bool Cancel(uint64_t ticket);

  // Moves each held pull for which ready(min_step, worker_id) is true to
  // `out`, with answer(worker_id) as its answer (in no particular order).
  void Release(absl::FunctionRef<bool(int64_t min_step, int worker_id)> ready,
               absl::FunctionRef<Snapshot(int worker_id)> answer,
               absl::Time now, Ready* out);
  // Moves every held pull to `out` with `status` (not OK) as its answer.
  void EndAll(const absl::Status& status, Ready* out);

  // The workers (ids >= 0) with a pull held.
  std::set<int> Workers() const;
  int size() const { return static_cast<int>(held_.size()); }
  // ShardStatus: pulls_waiting, ssp_blocked_pulls, ssp_blocked_seconds.
  void AddStatus(ShardStatus* s) const;

 private:
  struct Held {
    int64_t min_step = 0;
    int worker_id = -1;
    PullDone done;
    // When the bound held it back on arrival (else InfinitePast).
    absl::Time bound_held_since = absl::InfinitePast();
  };

  SspClock clock_;
  absl::flat_hash_map<uint64_t, Held> held_;
  uint64_t next_ticket_ = 1;
  // Pulls the bound held back on arrival, and the time they waited for it.
  int64_t bound_held_pulls_ = 0;
  absl::Duration bound_held_time_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_WAITING_PULLS_H_
