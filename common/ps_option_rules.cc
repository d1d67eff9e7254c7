#include "common/ps_option_rules.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace {

PsOptionProblem OutOfRange(std::string field, std::string value,
                           std::string rule) {
  return {std::move(field), std::move(value), std::move(rule), true};
}

PsOptionProblem NotHere(std::string field, std::string value,
                        std::string rule) {
  return {std::move(field), std::move(value), std::move(rule), false};
}

constexpr char kSyncNeverStale[] =
    "applies to async mode only (sync drops every stale gradient)";

}  // namespace

absl::optional<PsOptionProblem> FindPsOptionProblem(const PsOptionValues& v) {
  if (v.replicas_to_aggregate < 1) {
    return OutOfRange("replicas_to_aggregate",
                      absl::StrCat(v.replicas_to_aggregate), "is less than 1");
  }
  // The async staleness controls: each in range, then only in async mode.
  if (v.staleness_bound.has_value() && *v.staleness_bound < 0) {
    return OutOfRange("staleness_bound", absl::StrCat(*v.staleness_bound),
                      "is negative");
  }
  if (v.max_push_staleness.has_value() && *v.max_push_staleness < 0) {
    return OutOfRange("max_push_staleness", absl::StrCat(*v.max_push_staleness),
                      "is negative");
  }
  if (!(v.dc_asgd_lambda >= 0) || !std::isfinite(v.dc_asgd_lambda)) {
    return OutOfRange("dc_asgd_lambda", absl::StrCat(v.dc_asgd_lambda),
                      "is not a finite number >= 0 (0: off)");
  }
  if (v.async_beta1.has_value()) {
    if (!(*v.async_beta1 >= 0 && *v.async_beta1 < 1)) {
      return OutOfRange("async_beta1", absl::StrCat(*v.async_beta1),
                        "is not in [0, 1)");
    }
    if (!v.adam) {
      return NotHere("async_beta1", absl::StrCat(*v.async_beta1),
                     "applies to Adam only");
    }
  }
  if (!v.async) {
    if (v.staleness_bound.has_value()) {
      return NotHere("staleness_bound", absl::StrCat(*v.staleness_bound),
                     kSyncNeverStale);
    }
    if (v.max_push_staleness.has_value()) {
      return NotHere("max_push_staleness", absl::StrCat(*v.max_push_staleness),
                     kSyncNeverStale);
    }
    if (v.dc_asgd_lambda != 0) {
      return NotHere(
          "dc_asgd_lambda", absl::StrCat(v.dc_asgd_lambda),
          "applies to async mode only (sync gradients are never stale)");
    }
    if (v.async_beta1.has_value()) {
      return NotHere("async_beta1", absl::StrCat(*v.async_beta1),
                     "applies to async mode only");
    }
    if (v.scale_lr_by_staleness) {
      return NotHere("scale_lr_by_staleness", "true",
                     "applies to async mode only");
    }
  }
  if (!(v.worker_lease_seconds >= 0 && v.worker_lease_seconds <= 86400)) {
    return OutOfRange("worker_lease_seconds",
                      absl::StrCat(v.worker_lease_seconds),
                      "is not in [0, 86400] (0: no lease)");
  }
  if (v.checkpoint_every_steps < 0) {
    return OutOfRange("checkpoint.every_steps",
                      absl::StrCat(v.checkpoint_every_steps),
                      "is negative (0: not by steps)");
  }
  if (v.checkpoint_keep < 1 || v.checkpoint_keep > 1000) {
    return OutOfRange("checkpoint.keep", absl::StrCat(v.checkpoint_keep),
                      "is not in 1..1000");
  }
  return absl::nullopt;
}

}  // namespace psgd
