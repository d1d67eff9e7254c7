// Waiting for the parameter servers: to come up, through gRPC's standard
// health-checking service (which every ps_server runs), and for the chief to
// tell them the run directory.
//
// Thread-safety: a free function.
#ifndef PSGD_WORKER_SESSION_SERVER_WAIT_H_
#define PSGD_WORKER_SESSION_SERVER_WAIT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "ps/client/ps_client.h"

namespace psgd {

// Returns once every address answers a health check with SERVING, retrying
// with backoff; over TLS, and sending the token, as `security` says (the
// health service needs no token, but a TLS server takes only TLS).
// DEADLINE_EXCEEDED naming the servers that did not by `deadline`, with the
// last error each gave; NOT_FOUND / INTERNAL for a CA file that cannot be
// read.
absl::Status WaitForServers(const std::vector<std::string>& addresses,
                            const SecurityOptions& security,
                            absl::Time deadline);

// The run directory the chief sent with its Initialize, asking the servers
// (Status) until they have one. DEADLINE_EXCEEDED when none has by
// `deadline` (the chief has not started, or was given none).
absl::StatusOr<std::string> AwaitRunDir(ps::PsClient* client,
                                        absl::Time deadline);

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_SERVER_WAIT_H_
