// Learning-rate schedules, applied by the servers' optimizers
// (ps/state/optimizer.h) and checked at config load (common/cluster_config.h):
// a factor that multiplies the optimizer's learning rate at update t (1-based:
// Adam's t, the number of updates the shard has applied, which checkpoints save
// and restore, so a restored shard goes on where the schedule was). The same
// function in sync and async mode: one update is one sync step, or one async
// push.
//
//   scale      the linear scaling rule: the global batch over the batch the
//              learning rate was tuned for (Goyal et al. 2017), fixed
//   warmup     linear from warmup_from * scale to scale over the first
//              warmup_steps updates
//   then, counting from the end of the warmup (u = t - warmup_steps):
//     CONSTANT  1
//     STEP      decay_factor ^ floor(u / decay_every)
//     COSINE    final + (1 - final) * (1 + cos(pi * min(u, decay_steps) /
//               decay_steps)) / 2
//
// Thread-safety: plain values and pure functions.
#ifndef PSGD_COMMON_LR_SCHEDULE_H_
#define PSGD_COMMON_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/optional.h"

namespace psgd {

struct LrSchedule {
  enum class Decay { kConstant, kStep, kCosine };
  // The linear scaling rule's factor (1: none).
  double scale = 1.0;
  int64_t warmup_steps = 0;
  double warmup_from = 0.0;  // in [0, 1]
  Decay decay = Decay::kConstant;
  int64_t decay_every = 0;    // kStep: > 0
  double decay_factor = 0.1;  // kStep: in (0, 1]
  int64_t decay_steps = 0;    // kCosine: > 0
  double final_factor = 0.0;  // kCosine: in [0, 1]

  bool operator==(const LrSchedule& o) const;
};

// "constant", "step", "cosine".
const char* DecayName(LrSchedule::Decay decay);

// The factor at update t >= 1.
double LrFactor(const LrSchedule& schedule, int64_t t);

// The first field out of range ("scale", "warmup_steps", ...), its value
// and its rule; nullopt when the schedule is fine. `last_step` > 0: the
// run's last update, which the warmup must not pass (0: unknown, not
// checked).
struct LrScheduleProblem {
  std::string field;
  double value = 0.0;
  std::string rule;
};
absl::optional<LrScheduleProblem> FindLrScheduleProblem(
    const LrSchedule& schedule, int64_t last_step);
// The same as INVALID_ARGUMENT "learning-rate schedule: FIELD is V, RULE".
absl::Status ValidateLrSchedule(const LrSchedule& schedule, int64_t last_step);

// One line for logs: "scale 4, warmup 500 from 0.1, cosine over 4500 to 0".
std::string LrScheduleToString(const LrSchedule& schedule);

}  // namespace psgd

#endif  // PSGD_COMMON_LR_SCHEDULE_H_
