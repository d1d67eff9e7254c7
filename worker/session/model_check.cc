#include "worker/session/model_check.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

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

absl::Status AwaitInitialized(ps::PsClient* client, absl::Time deadline) {
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
    absl::SleepFor(absl::Milliseconds(50));
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

absl::StatusOr<std::vector<VariableSpec>> ServerVariables(ps::PsClient* client,
                                                          absl::Time deadline) {
  RETURN_IF_ERROR(AwaitInitialized(client, deadline));
  absl::StatusOr<std::vector<VariableSpec>> variables = client->Variables();
  if (!variables.ok()) {
    return Annotate(variables.status(), "reading the servers' variables: ");
  }
  return variables;
}

}  // namespace psgd
