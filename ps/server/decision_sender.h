// The gRPC side of shard 0's decisions (ps/shard/decision_relay.h): sends
// them to the other shards with the ApplyDecisions call, over channels made
// with the cluster's security options (TLS), as the agreement on checkpoints
// does, carrying the servers' peer token (SecurityOptions::peer_token;
// the cluster token where there is none).
//
// Thread-safety: the Deliver returned may be called from several threads.
#ifndef PSGD_PS_SERVER_DECISION_SENDER_H_
#define PSGD_PS_SERVER_DECISION_SENDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ps/server/server_options.h"
#include "ps/shard/decision_relay.h"

namespace psgd {
namespace ps {

// Delivers to shard k at addresses[k] (k >= 1) for the cluster of
// `options`. INVALID_ARGUMENT unless there is an address per shard;
// NOT_FOUND / INTERNAL for TLS files that cannot be read.
absl::StatusOr<DecisionRelay::Deliver> GrpcDecisionSender(
    const ServerOptions& options, std::vector<std::string> addresses);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_DECISION_SENDER_H_
