// Keeps a worker in the servers' live sets while it sends nothing for a
// while on purpose: the chief evaluating the test set, a sync worker
// waiting for the next step, and a worker whose push waits on a shard that
// takes its time (a follower paused by a GC or a swap storm: the worker
// sends shard 0, which expires leases, nothing meanwhile). Join is idempotent
// and counts as a sign of life (ps/shard/shard.h); without the renewals an
// evaluation longer than the cluster's worker_lease takes the chief out of the
// live set as if it had been killed, and so does a wait for a step on the
// shards that have already answered the worker's pull: a sync worker waiting
// for the next step is a waiter on the shards that have not completed it, which
// keeps its lease there, while the others hear nothing from it until the step
// completes everywhere. When that takes a lease (a worker killed in the middle
// of its push, its gradient on some shards and not on the others: they complete
// the step once its lease runs out), the waiting worker's lease ran out too
// on the shards that had answered.
//
// One thread for the session's life: it wakes every `period` and renews
// (PsClient::RenewLease: a Join to shard 0 alone, which never waits on a
// paused follower) when a Hold is alive that began at least a period before (a
// silence shorter than a period sends nothing; a longer one renews within two
// periods of its start and every period after). A Hold costs two lock
// operations and wakes nothing; its end waits for a renewal in flight, so
// that none lands after it (the worker's Leave would be undone).
//
//   LeaseKeeper keeper(client, kLeaseRenewalPeriod);
//   ...
//   {
//     LeaseKeeper::Hold hold(&keeper);
//     ... evaluate, or a pull that waits for the next step ...
//   }
//
// Not for a worker that has left: it would join again. Failures are
// ignored (the next request of the worker loop meets them).
//
// Thread-safety: Holds may come from any thread; the client must be
// thread-safe (ShardedPsClient is).
#ifndef PSGD_WORKER_SESSION_LEASE_KEEPER_H_
#define PSGD_WORKER_SESSION_LEASE_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "ps/client/ps_client.h"

namespace psgd {

// How often a worker that is silent on purpose renews its lease.
inline constexpr absl::Duration kLeaseRenewalPeriod = absl::Milliseconds(500);
// A named wait on the servers this long is logged (LeaseKeeper::Hold).
inline constexpr absl::Duration kWaitReportAfter = absl::Seconds(3);

class LeaseKeeper {
 public:
  // `client` is not owned and must outlive the keeper.
  LeaseKeeper(ps::PsClient* client, absl::Duration period);
  // Stops the thread (at most one Join still in flight is waited for).
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Renewals while it lives; a null keeper holds nothing. `what` names a
  // wait on the servers ("worker 1: the push for step 35"): one that lasts
  // kWaitReportAfter is logged once, with what it waits for, and its end
  // too (a paused or cut-off shard shows in the worker's log). A Hold with
  // no name (the worker's own compute) is never logged.
  class Hold {
   public:
    explicit Hold(LeaseKeeper* keeper, std::string what = {});
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    LeaseKeeper* const keeper_;
    bool named_ = false;  // this hold's `what` is the one reported
  };

  // Joins sent so far.
  int64_t renewals() const { return renewals_.load(); }
  // Rounds of the keeper's loop so far, one each period, held or not: a
  // test waits for rounds to pass instead of sleeping.
  int64_t rounds() const { return rounds_.load(); }

 private:
  void Run();
  // True when `what` became the wait reported (no other named one).
  bool Acquire(std::string what);
  // Returns once no renewal is in flight when it was the last hold.
  void Release(bool named);

  ps::PsClient* const client_;
  const absl::Duration period_;
  Mutex mu_;
  CondVar changed_;  // stop_ or renewing_ changed
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time silent_since_ ABSL_GUARDED_BY(mu_);  // when holds_ left 0
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool renewing_ ABSL_GUARDED_BY(mu_) = false;  // a Join in flight
  std::string what_ ABSL_GUARDED_BY(mu_);       // the named wait under way
  absl::Time what_since_ ABSL_GUARDED_BY(mu_);
  bool reported_ ABSL_GUARDED_BY(mu_) = false;  // what_ was logged
  std::atomic<int64_t> renewals_{0};
  std::atomic<int64_t> rounds_{0};
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_LEASE_KEEPER_H_
