// Carries shard 0's decisions to the other shards of a cluster (docs/PS.md,
// "One decision per push"): a queue of the decisions of the current
// generation and one sender thread per other shard, which hands that shard
// every decision it has not acknowledged yet, in order, through `deliver`
// (ParameterShard::ApplyDecisions in process, the ApplyDecisions call over
// gRPC), and retries with a growing pause (50 ms to 1 s) until the shard
// takes them. A shard that refuses (restarting, awaiting the rollback to a
// checkpoint) is asked again; the rollback that follows restarts the relay
// in the new generation, which drops what was queued for the old one.
//
// Thread-safety: thread-safe. Publish and Restart never block on a
// delivery, so the coordinator calls them under its own lock; `deliver`
// runs on the sender threads with no lock of the relay held.
#ifndef PSGD_PS_SHARD_DECISION_RELAY_H_
#define PSGD_PS_SHARD_DECISION_RELAY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// At least the bytes `d` takes encoded (wire::Decision: its kind's message
// inside, varints at their longest).
int64_t DecisionBytesBound(const Decision& d);

class DecisionRelay {
 public:
  // One delivery carries at most kMaxBatch decisions and, past its first
  // decision, at most kMaxBatchBytes of them by DecisionBytesBound: a
  // follower far behind catches up in steps, and the ApplyDecisions call that
  // carries them stays within the limit a server puts on it.
  static constexpr int64_t kMaxBatch = 256;
  static constexpr int64_t kMaxBatchBytes = 8 << 20;

  // Hands `decisions` (seq order, all of `generation`) to shard `shard`;
  // returns the last seq that shard has applied.
  using Deliver = std::function<absl::StatusOr<int64_t>(
      int shard, int64_t generation, absl::Span<const Decision> decisions)>;

  // For a cluster of `num_shards` shards (>= 2): senders for shards
  // 1 .. num_shards - 1, idle until set_deliver.
  DecisionRelay(int num_shards, int64_t generation);
  // Stops the senders (a delivery in progress ends first).
  ~DecisionRelay();
  DecisionRelay(const DecisionRelay&) = delete;
  DecisionRelay& operator=(const DecisionRelay&) = delete;

  // How decisions reach the shards; replaces the previous one.
  void set_deliver(Deliver deliver);

  // Queues `decision` (its seq the next of the generation) for every shard.
  void Publish(Decision decision);
  // The coordinator entered `generation` (a rollback or restore): the
  // queued decisions are dropped and seq starts again from 1.
  void Restart(int64_t generation);

  // Waits until every shard has acknowledged every decision published so
  // far, or `deadline`; true when it has. For tests and orderly shutdowns.
  bool AwaitDelivered(absl::Time deadline);
  // Waits until at most `n` decisions are not acknowledged by every shard,
  // or `deadline`; true when so. Shard 0 calls it before it decides a push
  // (flow control: the other shards stage the pushes that wait for their
  // decisions).
  bool AwaitBacklogAtMost(int64_t n, absl::Time deadline);
  // Decisions published and not acknowledged by every shard.
  int64_t backlog() const;

 private:
  void Send(int shard);

  const int num_shards_;
  mutable Mutex mu_;
  CondVar changed_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Deliver deliver_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_);
  // Decisions with seq first_seq_, first_seq_ + 1, ...; trimmed once every
  // shard has acknowledged them.
  std::deque<Decision> queue_ ABSL_GUARDED_BY(mu_);
  int64_t first_seq_ ABSL_GUARDED_BY(mu_) = 1;
  // By shard: the last seq it acknowledged (index 0 unused).
  std::vector<int64_t> acked_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> senders_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_DECISION_RELAY_H_
