// The server's word on a sync step that takes long: which workers it is
// still waiting for. The server's lifecycle (ps/server/server_lifecycle.h)
// checks its shard every tick and logs a warning once per step that has waited
// longer than --slow_step_seconds, so that a straggler (or a dead worker whose
// lease has not run out) shows in the log by name.
//
// Thread-safety: SlowStepLog is used by one thread (the lifecycle's loop).
#ifndef PSGD_PS_SERVER_SLOW_STEP_H_
#define PSGD_PS_SERVER_SLOW_STEP_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

class SlowStepLog {
 public:
  // `threshold` <= 0: never.
  explicit SlowStepLog(absl::Duration threshold) : threshold_(threshold) {}

  // The warning to log now for `status`, or "" (a sync step younger than
  // the threshold, nobody to wait for, or already reported).
  std::string Check(const ShardStatus& status, absl::Time now);

 private:
  const absl::Duration threshold_;
  int64_t reported_step_ = -1;
  int64_t reported_generation_ = -1;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_SLOW_STEP_H_
