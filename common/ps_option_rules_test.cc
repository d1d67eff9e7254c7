#include "common/ps_option_rules.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace psgd {
namespace {

PsOptionValues Async() {
  PsOptionValues v;
  v.async = true;
  return v;
}

// "FIELD VALUE RULE" of the problem, or "ok".
std::string ProblemOf(const PsOptionValues& v) {
  const absl::optional<PsOptionProblem> p = FindPsOptionProblem(v);
  if (!p.has_value()) return "ok";
  return p->field + " " + p->value + " " + p->rule +
         (p->out_of_range ? "" : " [not here]");
}

TEST_CASE("defaults and every control set in range are fine") {
  CHECK(ProblemOf(PsOptionValues{}) == "ok");
  PsOptionValues v = Async();
  v.staleness_bound = 0;
  v.max_push_staleness = 0;
  v.scale_lr_by_staleness = true;
  v.dc_asgd_lambda = 0.04;
  v.async_beta1 = 0;
  v.worker_lease_seconds = 86400;
  v.checkpoint_every_steps = 0;
  v.checkpoint_keep = 1000;
  CHECK(ProblemOf(v) == "ok");
}

TEST_CASE("each bound is refused naming the field, the value and the rule") {
  PsOptionValues v = Async();
  v.replicas_to_aggregate = 0;
  CHECK(ProblemOf(v) == "replicas_to_aggregate 0 is less than 1");
  v = Async();
  v.staleness_bound = -1;  // set: -1 is no "off" here
  CHECK(ProblemOf(v) == "staleness_bound -1 is negative");
  v = Async();
  v.max_push_staleness = -3;
  CHECK(ProblemOf(v) == "max_push_staleness -3 is negative");
  for (double bad : {-0.5, std::nan(""), HUGE_VAL}) {
    v = Async();
    v.dc_asgd_lambda = bad;
    CHECK(FindPsOptionProblem(v)->field == "dc_asgd_lambda");
  }
  v = Async();
  v.async_beta1 = 1;
  CHECK(ProblemOf(v) == "async_beta1 1 is not in [0, 1)");
  v.async_beta1 = 0.5;
  v.adam = false;
  CHECK(ProblemOf(v) == "async_beta1 0.5 applies to Adam only [not here]");
  v = PsOptionValues{};
  v.worker_lease_seconds = -2;
  CHECK(ProblemOf(v) ==
        "worker_lease_seconds -2 is not in [0, 86400] (0: no lease)");
  v.worker_lease_seconds = HUGE_VAL;
  CHECK(FindPsOptionProblem(v)->field == "worker_lease_seconds");
  v = PsOptionValues{};
  v.checkpoint_every_steps = -1;
  CHECK(ProblemOf(v) ==
        "checkpoint.every_steps -1 is negative (0: not by steps)");
  v = PsOptionValues{};
  v.checkpoint_keep = 0;
  CHECK(ProblemOf(v) == "checkpoint.keep 0 is not in 1..1000");
}

TEST_CASE("sync mode refuses every async control that is set") {
  const struct {
    void (*set)(PsOptionValues*);
    const char* expected;
  } cases[] = {
      {[](PsOptionValues* v) { v->staleness_bound = 0; },
       "staleness_bound 0 applies to async mode only (sync drops every stale "
       "gradient) [not here]"},
      {[](PsOptionValues* v) { v->max_push_staleness = 2; },
       "max_push_staleness 2 applies to async mode only (sync drops every "
       "stale gradient) [not here]"},
      {[](PsOptionValues* v) { v->dc_asgd_lambda = 0.5; },
       "dc_asgd_lambda 0.5 applies to async mode only (sync gradients are "
       "never stale) [not here]"},
      {[](PsOptionValues* v) { v->async_beta1 = 0.5; },
       "async_beta1 0.5 applies to async mode only [not here]"},
      {[](PsOptionValues* v) { v->scale_lr_by_staleness = true; },
       "scale_lr_by_staleness true applies to async mode only [not here]"},
  };
  for (const auto& c : cases) {
    PsOptionValues sync;
    c.set(&sync);
    CHECK(ProblemOf(sync) == c.expected);
    PsOptionValues async = Async();
    c.set(&async);
    CHECK(ProblemOf(async) == "ok");
  }
}

}  // namespace
}  // namespace psgd
