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
#include "absl/time/time.h"
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

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_LEASE_KEEPER_H_
