// Whether a worker program's variables are the cluster's: for a model that
// comes from the worker program (model { name: "external" }), the servers
// hold the chief's variables and any other worker must bring the same
// names and shapes; for a model of the registry, the registry's.
//
// A difference is refused with FAILED_PRECONDITION naming the first
// differing variable (in the worker's order) and both shapes, with the
// payload kModelMismatchPayload so that callers tell it apart by type
// (python/module.cc raises psgd.ModelMismatchError), not by its text.
//
// Thread-safety: free functions; the fetch blocks the calling thread.
#ifndef PSGD_WORKER_SESSION_MODEL_CHECK_H_
#define PSGD_WORKER_SESSION_MODEL_CHECK_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/model_variables.h"
#include "ps/client/ps_client.h"
#include "worker/session/recovery.h"

namespace psgd {

inline constexpr absl::string_view kModelMismatchPayload =
    "type.psgd/ModelMismatch";

// OK when `mine` and `theirs` have the same names with the same shapes (in
// any order). `mine_is` and `theirs_are` name the two sides in the message
// ("worker:2", "the servers' (the chief's)").
absl::Status CompareVariables(const std::vector<VariableSpec>& mine,
                              const std::vector<VariableSpec>& theirs,
                              absl::string_view mine_is,
                              absl::string_view theirs_are);

// The variables the servers hold (PsClient::Variables: names and whole
// shapes, row slices put back together). Waits until every shard is
// initialised (by the chief), at most until `deadline`
// (DEADLINE_EXCEEDED), saying once in the log that it waits for the chief;
// CANCELLED once `stop` (may be null) is set meanwhile (a signal). Errors:
// the servers' (UNAUTHENTICATED for a wrong token, UNAVAILABLE ...).
absl::StatusOr<std::vector<VariableSpec>> ServerVariables(
    ps::PsClient* client, absl::Time deadline, const WaitStop* stop = nullptr);

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_MODEL_CHECK_H_
