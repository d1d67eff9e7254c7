#include "worker/session/records.h"

#include <algorithm>

namespace psgd {

void StepTimings::Fill(absl::Duration server_wait, absl::Time run_start,
                       StepRecord* record) const {
  auto seconds = [](absl::Time a, absl::Time b) {
    return absl::ToDoubleSeconds(b - a);
  };
  record->wall_time_s = seconds(run_start, pulled);
  record->step_s = seconds(begin, pulled);
  record->images_per_s =
      record->step_s > 0 ? record->batch_size / record->step_s : 0.0;
  record->input_s = seconds(begin, batch_ready);
  record->compute_s = seconds(batch_ready, computed);
  record->push_s = seconds(computed, pushed);
  record->wait_s =
      std::min(absl::ToDoubleSeconds(server_wait), seconds(pushed, pulled));
  record->pull_s = seconds(pushed, pulled) - record->wait_s;
}

}  // namespace psgd
