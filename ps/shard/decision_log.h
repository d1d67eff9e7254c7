// The decisions of one generation, in sequence order (docs/PS.md, "One
// decision per push"). Shard 0 numbers every decision it makes (1, 2, ...)
// and hands it to the relay (ps/shard/decision_relay.h), which carries it to
// the other shards; a lone shard numbers its decisions and sends them
// nowhere. A shard other than 0 asks the log whether a decision it is sent
// is the next one to apply, a repeat of a recent one (the relay sent it
// again, its answer lost), or an error: a gap, a disagreement with the
// decision of the same seq, or a repeat older than the recent window.
//
// Thread-safety: none; the shard calls it under its mutex. The relay it
// publishes to is thread-safe and owned by the shard.
#ifndef PSGD_PS_SHARD_DECISION_LOG_H_
#define PSGD_PS_SHARD_DECISION_LOG_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ps/shard/decision_relay.h"
#include "ps/state/membership.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// The push counters of decision `d` of shard 0 (which counted them as it
// made it), on a shard that follows it.
void CountDecision(const Decision& d, PushCounters* counters);

class DecisionLog {
 public:
  // How many applied decisions a shard other than 0 remembers to tell a
  // repeat from a disagreement.
  static constexpr size_t kRecentDecisions = 1024;

  // `name` ("shard 1") for messages; `relay`: shard 0's of a cluster of
  // several shards (not owned, outlives the log's use), null otherwise.
  DecisionLog(std::string name, DecisionRelay* relay)
      : name_(std::move(name)), relay_(relay) {}

  // Shard 0, or a lone shard: `d`, just applied here, takes the next seq
  // and goes to the relay (nowhere without one).
  void Publish(Decision d);

  // A shard other than 0, for a decision it is sent: true when `d` is the
  // next one (apply it, then Applied), false for a repeat of a recent one
  // that agrees with it (nothing to do); FAILED_PRECONDITION naming the
  // decision's step and the shard for a repeat older than the window, one
  // that disagrees, or a gap.
  absl::StatusOr<bool> IsNext(const Decision& d) const;
  // A shard other than 0, for a decision it is sent: FAILED_PRECONDITION
  // (Refuse) for numbers no rule of shard 0 makes: no push named, a worker
  // id out of `membership`'s range, lr_scale, staleness or N of the next
  // step out of range, more pushes than the kind takes.
  absl::Status CheckNumbers(const Decision& d,
                            const Membership& membership) const;
  // FAILED_PRECONDITION naming `d`'s seq, kind, step and the shard.
  absl::Status Refuse(const Decision& d, absl::string_view why) const;
  // `d` (IsNext) is applied.
  void Applied(const Decision& d);

  // The seq of the last decision published (shard 0) or applied (the
  // others) in this generation; 0 for none.
  int64_t last() const { return last_; }

  // A new generation (a rollback, a restore): seq starts again from 1, and
  // the relay drops what it had queued of the old one.
  void Restart(int64_t generation);

 private:
  const std::string name_;
  DecisionRelay* const relay_;
  int64_t last_ = 0;
  // The other shards: the decisions applied most recently, oldest first.
  std::deque<Decision> recent_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SHARD_DECISION_LOG_H_
