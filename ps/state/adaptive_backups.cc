#include "ps/state/adaptive_backups.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {

absl::Status ValidateAdaptiveBackupOptions(const AdaptiveBackupOptions& o,
                                           int workers) {
  if (o.n_min < 1 || o.n_min > o.n_max) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive backups: min_replicas ", o.n_min,
                     " is not in 1..", o.n_max, " (max_replicas)"));
  }
  if (o.n_max > workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive backups: max_replicas ", o.n_max,
                     " is more than total_num_replicas (", workers, ")"));
  }
  if (o.window < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "adaptive backups: window_steps ", o.window, " is less than 1"));
  }
  if (o.warmup < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "adaptive backups: warmup_steps ", o.warmup, " is negative"));
  }
  return absl::OkStatus();
}

AdaptiveBackups::AdaptiveBackups(AdaptiveBackupOptions options)
    : options_(options), n_(options.n_max) {}

AdaptiveBackups::StepArrivals* AdaptiveBackups::Find(int64_t step) {
  for (StepArrivals& s : steps_) {
    if (s.step == step) return &s;
  }
  return nullptr;
}

void AdaptiveBackups::Published(int64_t step, absl::Time at) {
  if (StepArrivals* s = Find(step)) {
    s->published = at;  // a restore or rollback publishes it again
    s->offsets.clear();
    s->completed = false;
    return;
  }
  // Steps from before a restore to a later step, or ahead of it: gone.
  while (!steps_.empty() && steps_.back().step > step) steps_.pop_back();
  StepArrivals s;
  s.step = step;
  s.published = at;
  steps_.push_back(std::move(s));
}

void AdaptiveBackups::Arrived(int64_t step, absl::Time at) {
  if (StepArrivals* s = Find(step)) s->offsets.push_back(at - s->published);
}

int AdaptiveBackups::Completed(int64_t step, absl::Time now) {
  if (StepArrivals* s = Find(step)) s->completed = true;
  ++completed_;
  // The window: the last `window` completed steps.
  int completed_in = 0;
  for (const StepArrivals& s : steps_) completed_in += s.completed ? 1 : 0;
  while (completed_in > options_.window) {
    completed_in -= steps_.front().completed ? 1 : 0;
    steps_.pop_front();
  }
  rates_.clear();
  if (completed_ < options_.warmup || completed_in == 0) {
    n_ = options_.n_max;
    return n_;
  }
  // The offsets sorted once per step.
  std::vector<std::vector<absl::Duration>> sorted;
  std::vector<absl::Duration> age;
  for (const StepArrivals& s : steps_) {
    if (!s.completed) continue;
    sorted.push_back(s.offsets);
    std::sort(sorted.back().begin(), sorted.back().end());
    age.push_back(now - s.published);
  }
  int best = options_.n_max;
  double best_rate = -1;
  for (int n = options_.n_min; n <= options_.n_max; ++n) {
    double sum = 0;  // seconds
    for (size_t i = 0; i < sorted.size(); ++i) {
      const absl::Duration t =
          static_cast<int>(sorted[i].size()) >= n ? sorted[i][n - 1] : age[i];
      sum += absl::ToDoubleSeconds(t);
    }
    const double mean = sum / sorted.size();
    const double rate = mean > 0 ? n / mean : 1e300;
    rates_.push_back(rate);
    if (rate >= best_rate) {  // ties: the larger n
      best_rate = rate;
      best = n;
    }
  }
  n_ = best;
  return n_;
}

}  // namespace ps
}  // namespace psgd
