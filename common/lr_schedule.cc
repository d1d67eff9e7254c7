#include "common/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

bool LrSchedule::operator==(const LrSchedule& o) const {
  return scale == o.scale && warmup_steps == o.warmup_steps &&
         warmup_from == o.warmup_from && decay == o.decay &&
         decay_every == o.decay_every && decay_factor == o.decay_factor &&
         decay_steps == o.decay_steps && final_factor == o.final_factor;
}

const char* DecayName(LrSchedule::Decay decay) {
  switch (decay) {
    case LrSchedule::Decay::kConstant:
      return "constant";
    case LrSchedule::Decay::kStep:
      return "step";
    case LrSchedule::Decay::kCosine:
      return "cosine";
  }
  return "constant";
}

double LrFactor(const LrSchedule& s, int64_t t) {
  t = std::max<int64_t>(t, 1);
  if (t <= s.warmup_steps) {
    // Update t of the warmup: from warmup_from (t = 0) to 1 (t = warmup).
    const double f = static_cast<double>(t) / s.warmup_steps;
    return s.scale * (s.warmup_from + (1.0 - s.warmup_from) * f);
  }
  const int64_t u = t - s.warmup_steps;
  switch (s.decay) {
    case LrSchedule::Decay::kConstant:
      return s.scale;
    case LrSchedule::Decay::kStep:
      return s.scale *
             std::pow(s.decay_factor, static_cast<double>(u / s.decay_every));
    case LrSchedule::Decay::kCosine: {
      const double p =
          static_cast<double>(std::min(u, s.decay_steps)) / s.decay_steps;
      return s.scale * (s.final_factor + (1.0 - s.final_factor) *
                                             (1.0 + std::cos(kPi * p)) / 2.0);
    }
  }
  return s.scale;
}

absl::optional<LrScheduleProblem> FindLrScheduleProblem(const LrSchedule& s,
                                                        int64_t last_step) {
  using P = LrScheduleProblem;
  if (!(s.scale > 0) || !std::isfinite(s.scale)) {
    return P{"scale", s.scale, "must be positive and finite"};
  }
  if (s.warmup_steps < 0) {
    return P{"warmup_steps", static_cast<double>(s.warmup_steps),
             "must not be negative"};
  }
  if (last_step > 0 && s.warmup_steps > last_step) {
    return P{"warmup_steps", static_cast<double>(s.warmup_steps),
             absl::StrCat("goes past the last step ", last_step)};
  }
  if (!(s.warmup_from >= 0 && s.warmup_from <= 1)) {
    return P{"warmup_from", s.warmup_from, "must be in [0, 1]"};
  }
  switch (s.decay) {
    case LrSchedule::Decay::kConstant:
      break;
    case LrSchedule::Decay::kStep:
      if (s.decay_every <= 0) {
        return P{"decay_every", static_cast<double>(s.decay_every),
                 "must be positive for step decay"};
      }
      if (!(s.decay_factor > 0 && s.decay_factor <= 1)) {
        return P{"decay_factor", s.decay_factor, "must be in (0, 1]"};
      }
      break;
    case LrSchedule::Decay::kCosine:
      if (s.decay_steps <= 0) {
        return P{"decay_steps", static_cast<double>(s.decay_steps),
                 "must be positive for cosine decay"};
      }
      if (!(s.final_factor >= 0 && s.final_factor <= 1)) {
        return P{"final_factor", s.final_factor, "must be in [0, 1]"};
      }
      break;
  }
  return absl::nullopt;
}

absl::Status ValidateLrSchedule(const LrSchedule& s, int64_t last_step) {
  const absl::optional<LrScheduleProblem> bad =
      FindLrScheduleProblem(s, last_step);
  if (!bad.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("learning-rate schedule: ", bad->field, " is ", bad->value,
                   ", ", bad->rule));
}

std::string LrScheduleToString(const LrSchedule& s) {
  std::string out = absl::StrCat("scale ", s.scale);
  if (s.warmup_steps > 0) {
    absl::StrAppend(&out, ", warmup ", s.warmup_steps, " from ", s.warmup_from);
  }
  switch (s.decay) {
    case LrSchedule::Decay::kConstant:
      absl::StrAppend(&out, ", constant");
      break;
    case LrSchedule::Decay::kStep:
      absl::StrAppend(&out, ", x", s.decay_factor, " every ", s.decay_every);
      break;
    case LrSchedule::Decay::kCosine:
      absl::StrAppend(&out, ", cosine over ", s.decay_steps, " to ",
                      s.final_factor);
      break;
  }
  return out;
}

}  // namespace psgd
