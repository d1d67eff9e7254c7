#include "ps/state/async_applier.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

absl::StatusOr<int64_t> AsyncApplier::Admit(int64_t current_step,
                                            int64_t gradient_step) const {
  const int64_t staleness = current_step - gradient_step;
  if (staleness_bound_ >= 0 && staleness > staleness_bound_) {
    return PushRefused(
        PushRefusal::kTooStale,
        absl::StrCat("gradient from step ", gradient_step, " has staleness ",
                     staleness, " (the shard is at step ", current_step,
                     "), beyond max_push_staleness ", staleness_bound_,
                     ": pull fresh weights and compute again"));
  }
  return staleness;
}

double AsyncApplier::LrScale(int64_t staleness) const {
  if (!scale_lr_by_staleness_) return 1.0;
  return 1.0 / static_cast<double>(std::max<int64_t>(1, staleness));
}

void AsyncApplier::Record(int64_t staleness) {
  ++histogram_[std::min(staleness, kMaxTrackedStaleness)];
}

}  // namespace ps
}  // namespace psgd
