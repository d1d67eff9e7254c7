// Which workers of a shard are live. Workers join before they push and
// leave when they are done (or depart); the shard asks how many are live to
// decide when a sync step is complete.
//
// Worker ids are 0 .. total_num_replicas-1. A worker may leave and join
// again. For each worker the object keeps when it was last seen, the last
// step it pushed for (kept across a leave and a rejoin, so that a restarted
// worker cannot push twice for one step), the incarnation (process) it last
// joined as, and why it left when it left with a failure. Heartbeat leases
// sit on top: LiveNotSeenSince(now - lease) names the workers whose leases
// ran out, and the shard counts them (CountExpired).
//
// Thread-safety: none; the shard calls it under its mutex.
#ifndef PSGD_PS_STATE_MEMBERSHIP_H_
#define PSGD_PS_STATE_MEMBERSHIP_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psgd {
namespace ps {

class Membership {
 public:
  // Requires total_num_replicas >= 1.
  explicit Membership(int total_num_replicas);

  int total_num_replicas() const { return static_cast<int>(workers_.size()); }

  // OK for 0 <= id < total_num_replicas; INVALID_ARGUMENT naming the id
  // otherwise.
  absl::Status CheckWorkerId(int id) const;

  // The methods below require CheckWorkerId(id).ok().

  // Makes the worker live; true when it was not. Counts as seen at `now`.
  bool Join(int id, absl::Time now);
  // Makes the worker not live; true when it was.
  bool Leave(int id);
  bool IsLive(int id) const { return workers_[id].live; }
  int num_live() const { return num_live_; }
  // Ascending.
  std::vector<int> LiveWorkers() const;

  // Records a sign of life.
  void Touch(int id, absl::Time now);
  // Live workers last seen before `t`, ascending.
  std::vector<int> LiveNotSeenSince(absl::Time t) const;

  // The last step the worker pushed for, -1 before its first push.
  int64_t last_push_step(int id) const { return workers_[id].last_push_step; }
  void RecordPush(int id, int64_t step) { workers_[id].last_push_step = step; }

  // Every worker's last_push_step, by id (for checkpoints).
  std::vector<int64_t> LastPushSteps() const;
  // Sets every worker's last_push_step (a restored checkpoint); requires
  // steps.size() == total_num_replicas().
  void RestoreLastPushSteps(const std::vector<int64_t>& steps);

  // Records the incarnation (a process's number, not 0) a worker joins as;
  // true when it is not the one recorded before: a new process under the
  // id, for which its predecessor's unfinished pushes and chunks no longer
  // count. 0 (a worker that sends none) records nothing and is false.
  bool NewIncarnation(int id, uint64_t incarnation);

  // Why a worker left with a failure (Leave with a reason); a worker that
  // joins again is no longer failed.
  void SetFailure(int id, std::string why) {
    workers_[id].failure = std::move(why);
  }
  void ClearFailure(int id) { workers_[id].failure.clear(); }
  // (id, why) of the failed workers, ascending.
  std::vector<std::pair<int, std::string>> Failures() const;

  // Workers whose leases ran out (counted by the shard, saved in
  // checkpoints).
  void CountExpired() { ++expired_; }
  int64_t expired() const { return expired_; }
  void set_expired(int64_t n) { expired_ = n; }

 private:
  struct Worker {
    bool live = false;
    absl::Time last_seen = absl::InfinitePast();
    int64_t last_push_step = -1;
    uint64_t incarnation = 0;
    std::string failure;  // empty: none
  };
  std::vector<Worker> workers_;
  int num_live_ = 0;
  int64_t expired_ = 0;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_MEMBERSHIP_H_
