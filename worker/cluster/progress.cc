#include "worker/cluster/progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psgd {

double FractionDone(const RunEnds& ends, int64_t global_step,
                    double elapsed_s, int64_t batches_done) {
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

std::string ProgressText(double fraction, double elapsed_s) {
  if (!(fraction > 0)) return "";
  const int64_t left =
      std::llround(elapsed_s * (1.0 - fraction) / fraction);
  std::string eta;
  if (left >= 3600) {
    eta = absl::StrCat(left / 3600, "h", absl::StrFormat("%02d", (left % 3600) / 60), "m");
  } else if (left >= 60) {
    eta = absl::StrCat(left / 60, "m", absl::StrFormat("%02d", left % 60), "s");
  } else {
    eta = absl::StrCat(left, "s");
  }
  return absl::StrFormat("%.1f%% done, ETA %s", 100.0 * fraction, eta);
}

}  // namespace psgd
