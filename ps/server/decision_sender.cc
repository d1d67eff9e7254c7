#include "ps/server/decision_sender.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"
#include "ps/wire/wire.h"

namespace psgd {
namespace ps {

absl::StatusOr<DecisionRelay::Deliver> GrpcDecisionSender(
    const ServerOptions& options, std::vector<std::string> addresses) {
  const int num_shards = options.shard.num_shards;
  if (static_cast<int>(addresses.size()) != num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard 0 sends its decisions to every other shard: ", num_shards,
        " shards need as many addresses, not ", addresses.size()));
  }
  ASSIGN_OR_RETURN(ClientCredentials credentials,
                   MakeClientCredentials(options.security));
  // ApplyDecisions is the servers' own call: it carries their peer token.
  if (!options.security.peer_token.empty()) {
    credentials.token = options.security.peer_token;
  }
  auto stubs = std::make_shared<
      std::vector<std::unique_ptr<wire::ParameterServer::Stub>>>();
  for (int k = 0; k < num_shards; ++k) {
    stubs->push_back(
        k == 0 ? nullptr
               : wire::ParameterServer::NewStub(CreateChannel(
                     addresses[k], credentials, PeerChannelArguments())));
  }
  const std::string cluster = options.shard.cluster_name;
  return DecisionRelay::Deliver(
      [stubs, cluster, addresses = std::move(addresses)](
          int shard, int64_t generation,
          absl::Span<const Decision> decisions) -> absl::StatusOr<int64_t> {
        wire::ApplyDecisionsRequest request;
        request.set_cluster(cluster);
        request.set_generation(generation);
        for (const Decision& d : decisions) {
          DecisionToProto(d, request.add_decisions());
        }
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
        wire::ApplyDecisionsResponse response;
        absl::Status s = FromGrpcStatus(
            (*stubs)[shard]->ApplyDecisions(&ctx, request, &response));
        if (!s.ok()) {
          return Annotate(s, absl::StrCat("ApplyDecisions to ps:", shard,
                                          " at ", addresses[shard], ": "));
        }
        return response.applied_seq();
      });
}

}  // namespace ps
}  // namespace psgd
