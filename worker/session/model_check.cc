#include "worker/session/model_check.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace {

absl::Status Mismatch(std::string message) {
  absl::Status s = absl::FailedPreconditionError(std::move(message));
  s.SetPayload(kModelMismatchPayload, absl::Cord("1"));
  return s;
}

const VariableSpec* Find(const std::vector<VariableSpec>& specs,
                         const std::string& name) {
  for (const VariableSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

absl::Status AwaitInitialized(ps::PsClient* client, absl::Time deadline,
                              const WaitStop* stop) {
  // Said once the chief is late (it usually initialises within a second).
  const absl::Time say_at = absl::Now() + absl::Seconds(2);
  bool logged = false;
  for (;;) {
    absl::StatusOr<std::vector<ps::ShardStatus>> status = client->Status();
    if (!status.ok() && !absl::IsUnavailable(status.status())) {
      return status.status();
    }
    bool all = status.ok();
    if (status.ok()) {
      for (const ps::ShardStatus& s : *status) all = all && s.initialized;
    }
    if (all) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          "the servers were not initialised by the chief in time");
    }
    if (!logged && absl::Now() >= say_at) {
      // A chief that died before it joined is waited for until `deadline`:
      // said, not in silence.
      spdlog::info(
          "waiting for the chief (worker:0) to initialise the servers (for "
          "at most {} more: the start timeout)",
          absl::FormatDuration(
              absl::Trunc(deadline - absl::Now(), absl::Seconds(1))));
      logged = true;
    }
    if (stop == nullptr) {
      absl::SleepFor(absl::Milliseconds(50));
    } else if (!stop->SleepFor(absl::Milliseconds(50))) {
      return StoppedWaiting("waiting for the chief to initialise the servers");
    }
  }
}

}  // namespace

absl::Status CompareVariables(const std::vector<VariableSpec>& mine,
                              const std::vector<VariableSpec>& theirs,
                              absl::string_view mine_is,
                              absl::string_view theirs_are) {
  for (const VariableSpec& v : mine) {
    const VariableSpec* t = Find(theirs, v.name);
    if (t == nullptr) {
      return Mismatch(absl::StrCat(
          mine_is, "'s variable '", v.name, "' (shape ", ShapeToString(v.shape),
          ") is not among ", theirs_are, " variables"));
    }
    if (t->shape != v.shape) {
      return Mismatch(absl::StrCat(mine_is, "'s variable '", v.name,
                                   "' has shape ", ShapeToString(v.shape),
                                   " but ", theirs_are, " has shape ",
                                   ShapeToString(t->shape)));
    }
    if (t->kind != v.kind) {
      return Mismatch(absl::StrCat(
          mine_is, "'s variable '", v.name, "' is a ", VariableKindName(v.kind),
          " but ", theirs_are, " is a ", VariableKindName(t->kind)));
    }
  }
  for (const VariableSpec& t : theirs) {
    if (Find(mine, t.name) == nullptr) {
      return Mismatch(absl::StrCat(mine_is, " lacks variable '", t.name,
                                   "' (shape ", ShapeToString(t.shape), ") of ",
                                   theirs_are, " variables"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<VariableSpec>> ServerVariables(
    ps::PsClient* client, absl::Time deadline, const WaitStop* stop) {
  RETURN_IF_ERROR(AwaitInitialized(client, deadline, stop));
  absl::StatusOr<std::vector<VariableSpec>> variables = client->Variables();
  if (!variables.ok()) {
    return Annotate(variables.status(), "reading the servers' variables: ");
  }
  return variables;
}

}  // namespace psgd
