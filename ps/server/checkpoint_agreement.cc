#include "ps/server/checkpoint_agreement.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"
#include "ps/checkpoint/agreement.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {

namespace {

// Shard i's complete checkpoints, asked over `stub`.
absl::StatusOr<std::vector<CompleteCheckpointInfo>> ListCheckpointsOf(
    wire::ParameterServer::Stub* stub, int i, const std::string& cluster,
    absl::Time deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(
      absl::ToChronoTime(std::min(deadline, absl::Now() + absl::Seconds(5))));
  wire::ListCheckpointsRequest request;
  request.set_cluster(cluster);
  wire::ListCheckpointsResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(stub->ListCheckpoints(&ctx, request, &response)));
  if (response.shard_index() != i) {
    return absl::FailedPreconditionError(
        absl::StrCat("it says it is shard ", response.shard_index()));
  }
  std::vector<CompleteCheckpointInfo> list;
  for (const wire::CompleteCheckpointInfo& c : response.checkpoints()) {
    list.push_back({c.label(), c.generation(), c.step()});
  }
  return list;
}

// Every other shard's complete checkpoints into `per_shard`, asking again
// (backing off to 1 s) those that do not answer, until `deadline`.
absl::Status AskEveryShard(
    const ShardOptions& o, const std::vector<std::string>& addresses,
    const ClientCredentials& credentials, absl::Time deadline,
    std::vector<std::vector<CompleteCheckpointInfo>>* per_shard) {
  std::map<int, std::string> missing;  // shard -> its last error
  std::map<int, std::unique_ptr<wire::ParameterServer::Stub>> stubs;
  for (int i = 0; i < o.num_shards; ++i) {
    if (i == o.shard_index) continue;
    missing[i] = "not asked yet";
    stubs[i] = wire::ParameterServer::NewStub(
        CreateChannel(addresses[i], credentials, PeerChannelArguments()));
  }
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    for (auto it = missing.begin(); it != missing.end();) {
      const int i = it->first;
      absl::StatusOr<std::vector<CompleteCheckpointInfo>> list =
          ListCheckpointsOf(stubs[i].get(), i, o.cluster_name, deadline);
      if (list.ok()) {
        (*per_shard)[i] = *std::move(list);
        it = missing.erase(it);
        continue;
      }
      const absl::Status& s = list.status();
      if (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s)) {
        return absl::Status(
            s.code(), absl::StrCat("ps:", o.shard_index,
                                   ": agreeing on a checkpoint: ps:", i, " at ",
                                   addresses[i], " refused: ", s.message()));
      }
      it->second = std::string(s.message());
      ++it;
    }
    if (missing.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      std::vector<std::string> names;
      for (const auto& [i, error] : missing) {
        names.push_back(
            absl::StrCat("ps:", i, " at ", addresses[i], " (", error, ")"));
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "ps:", o.shard_index,
          ": cannot agree on the checkpoint to restore: no answer from ",
          absl::StrJoin(names, ", ")));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

// The log line of an agreement: each shard's complete checkpoints and the
// one agreed on.
void LogAgreement(
    const std::vector<std::vector<CompleteCheckpointInfo>>& per_shard,
    int64_t label) {
  std::vector<std::string> lists;
  for (size_t i = 0; i < per_shard.size(); ++i) {
    std::vector<std::string> labels;
    for (const CompleteCheckpointInfo& c : per_shard[i]) {
      labels.push_back(absl::StrCat(c.label, "/g", c.generation));
    }
    lists.push_back(
        absl::StrCat("ps:", i, " [", absl::StrJoin(labels, " "), "]"));
  }
  spdlog::info("checkpoints complete per shard: {}; agreed: {}",
               absl::StrJoin(lists, ", "),
               label < 0 ? std::string("none (start empty)")
                         : absl::StrCat("step-", label));
}

}  // namespace

absl::StatusOr<int64_t> AgreeAndRestore(ParameterShard* shard,
                                        const ServerOptions& options,
                                        absl::Time deadline) {
  const ShardOptions& o = shard->options();
  const std::vector<std::string>& addresses = options.ps_addresses;
  if (static_cast<int>(addresses.size()) != o.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps:", o.shard_index,
                     ": agreeing on a checkpoint needs the addresses "
                     "of all ",
                     o.num_shards, " shards (", addresses.size(), " given)"));
  }
  ASSIGN_OR_RETURN(ClientCredentials credentials,
                   MakeClientCredentials(options.security));
  std::vector<std::vector<CompleteCheckpointInfo>> per_shard(o.num_shards);
  per_shard[o.shard_index] = shard->CompleteCheckpoints();
  RETURN_IF_ERROR(
      AskEveryShard(o, addresses, credentials, deadline, &per_shard));
  const int64_t label = AgreeOnCheckpoint(per_shard);
  LogAgreement(per_shard, label);
  RETURN_IF_ERROR(shard->RestoreAgreed(label));
  return label;
}

}  // namespace ps
}  // namespace psgd
