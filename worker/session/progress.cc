#include "worker/session/progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace psgd {

double FractionDone(const RunEnds& ends, int64_t global_step, double elapsed_s,
                    int64_t batches_done) {
  double f = -1.0;
  if (ends.max_steps > 0) {
    f = std::max(f, static_cast<double>(global_step) / ends.max_steps);
  }
  if (ends.max_seconds > 0) f = std::max(f, elapsed_s / ends.max_seconds);
  if (ends.total_batches > 0) {
    f = std::max(f, static_cast<double>(batches_done) / ends.total_batches);
  }
  return f < 0 ? -1.0 : std::min(f, 1.0);
}

std::string StopReason(const RunEnds& ends, int64_t global_step,
                       absl::Duration elapsed) {
  if (ends.max_steps > 0 && global_step >= ends.max_steps) {
    return absl::StrCat("reached step ", global_step);
  }
  const absl::Duration budget = absl::Seconds(ends.max_seconds);
  if (budget > absl::ZeroDuration() && elapsed >= budget) {
    return absl::StrCat("the time budget of ", absl::FormatDuration(budget),
                        " is spent");
  }
  return "";
}

std::string ProgressText(double fraction, double elapsed_s) {
  if (!(fraction > 0)) return "";
  const int64_t left = std::llround(elapsed_s * (1.0 - fraction) / fraction);
  std::string eta;
  if (left >= 3600) {
    eta = absl::StrCat(left / 3600, "h",
                       absl::StrFormat("%02d", (left % 3600) / 60), "m");
  } else if (left >= 60) {
    eta = absl::StrCat(left / 60, "m", absl::StrFormat("%02d", left % 60), "s");
  } else {
    eta = absl::StrCat(left, "s");
  }
  return absl::StrFormat("%.1f%% done, ETA %s", 100.0 * fraction, eta);
}

void ProgressLog::Add(const StepRecord& r, int64_t global_step,
                      int64_t batches_done) {
  step_seconds_ += r.step_s;
  images_ += r.batch_size;
  window_loss_ += r.loss;
  ++window_steps_;
  if (every_ <= 0 || r.local_step % every_ != 0) return;
  const std::string progress = ProgressText(
      FractionDone(ends_, global_step, r.wall_time_s, batches_done),
      r.wall_time_s);
  spdlog::info(
      "step {} (local {}): loss {:.4f}, {:.0f} images/s, last "
      "step {:.3f} s (pull {:.3f}, compute {:.3f}, push {:.3f}, "
      "wait {:.3f}), {}{}{}",
      global_step, r.local_step, window_loss_ / window_steps_,
      images_ / step_seconds_, r.step_s, r.pull_s, r.compute_s, r.push_s,
      r.wait_s, std::string(StepOutcomeName(r.outcome)),
      progress.empty() ? "" : "; ", progress);
  window_loss_ = 0.0;
  window_steps_ = 0;
}

}  // namespace psgd
