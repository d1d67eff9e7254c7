// Keeps a worker in the servers' live sets while it sends nothing for a
// while on purpose (the chief evaluating the test set): a thread of its own
// joins again every `period` (Join is idempotent and counts as a sign of
// life, ps/shard/shard.h), until the keeper is destroyed. Without it, an
// evaluation longer than the cluster's worker_lease takes the chief out of
// the live set as if it had been killed.
//
//   {
//     LeaseKeeper keep(session.client(), absl::Seconds(1));
//     ... evaluate ...
//   }
//
// Not for a worker that has left: it would join again. Failures are
// ignored (the next request of the worker loop meets them).
//
// Thread-safety: the client must be thread-safe (ShardedPsClient is).
#ifndef PSGD_WORKER_SESSION_LEASE_KEEPER_H_
#define PSGD_WORKER_SESSION_LEASE_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "ps/client/ps_client.h"

namespace psgd {

class LeaseKeeper {
 public:
  // `client` is not owned and must outlive the keeper.
  LeaseKeeper(ps::PsClient* client, absl::Duration period);
  // Stops the thread (at most one Join still in flight is waited for).
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Joins sent so far.
  int64_t renewals() const { return renewals_.load(); }

 private:
  absl::Notification stop_;
  std::atomic<int64_t> renewals_{0};
  std::thread thread_;
};

// How often a worker that is silent on purpose renews its lease: the
// chief's evaluations and a sync worker's waits for a step.
inline constexpr absl::Duration kLeaseRenewalPeriod = absl::Milliseconds(500);

// The same renewal for a worker's waits for a step, with one thread for the
// session's life instead of one per wait: it wakes every `period` and joins
// when a Hold is alive that began at least a period before (so a wait
// shorter than a period sends nothing, and a longer one renews within two
// periods of its start and every period after). A Hold costs two lock
// operations and wakes nothing. A sync worker waiting for the next step
// is a waiter on the shards that have not completed it, which keeps its
// lease there; the shards that have already answered its pull hear nothing
// from it until the others complete the step. When that takes a lease (a
// worker killed in the middle of its push, its gradient on some shards and
// not on the others: they complete the step once its lease runs out),
// the waiting worker's lease ran out too on the shards that had answered.
//
//   WaitingLease lease(client, kLeaseRenewalPeriod);
//   ...
//   {
//     WaitingLease::Hold hold(&lease);
//     ... a pull that waits for the next step ...
//   }
//
// A Hold's end waits for a renewal in flight, so that none lands after it
// (the worker's Leave would be undone).
//
// Thread-safety: Holds may come from any thread; the client must be
// thread-safe (ShardedPsClient is).
class WaitingLease {
 public:
  // `client` is not owned and must outlive the object.
  WaitingLease(ps::PsClient* client, absl::Duration period);
  // Stops the thread (at most one Join still in flight is waited for).
  ~WaitingLease();
  WaitingLease(const WaitingLease&) = delete;
  WaitingLease& operator=(const WaitingLease&) = delete;

  // Renewals while it lives; a null lease holds nothing.
  class Hold {
   public:
    explicit Hold(WaitingLease* lease);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    WaitingLease* const lease_;
  };

  // Joins sent so far.
  int64_t renewals() const { return renewals_.load(); }

 private:
  void Run();
  void Acquire();
  // Returns once no renewal is in flight when it was the last hold.
  void Release();

  ps::PsClient* const client_;
  const absl::Duration period_;
  Mutex mu_;
  CondVar changed_;  // stop_ or renewing_ changed
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time waiting_since_ ABSL_GUARDED_BY(mu_);  // when holds_ left 0
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool renewing_ ABSL_GUARDED_BY(mu_) = false;  // a Join in flight
  std::atomic<int64_t> renewals_{0};
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_LEASE_KEEPER_H_
