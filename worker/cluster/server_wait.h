// Waiting for the parameter servers to come up, through gRPC's standard
// health-checking service (which every ps_server runs).
//
// Thread-safety: a free function.
#ifndef PSGD_WORKER_CLUSTER_SERVER_WAIT_H_
#define PSGD_WORKER_CLUSTER_SERVER_WAIT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psgd {

// Returns once every address answers a health check with SERVING, retrying
// with backoff. DEADLINE_EXCEEDED naming the servers that did not by
// `deadline`, with the last error each gave.
absl::Status WaitForServers(const std::vector<std::string>& addresses,
                            absl::Time deadline);

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_SERVER_WAIT_H_
