// The PsClient over ParameterShard objects in this process: the sharded client
// (ps/client/sharded_client.h) over one InProcessShardChannel per shard, which
// hands each request to the shard's request handler
// (ps/server/request_handler.h), the same core the gRPC server wraps, without
// sockets. So a test in process runs the handler's checks and the wire dtype
// conversions (gradients to the wire dtype and back, weights in the shards'
// wire dtype back to float32) as over gRPC. For tests, including those that run
// under ThreadSanitizer (Debian's gRPC is not tsan-built).
//
// Thread-safety: InProcessShardChannel and InProcessPsClient are
// thread-safe (ShardedPsClient's contract); many clients, one per worker
// thread, may share the shards. The shards are not owned and must outlive
// the channels and clients over them.
#ifndef PSGD_PS_TESTING_IN_PROCESS_CLIENT_H_
#define PSGD_PS_TESTING_IN_PROCESS_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "ps/client/shard_channel.h"
#include "ps/client/sharded_client.h"
#include "ps/server/request_handler.h"
#include "ps/shard/shard.h"
#include "ps/state/placement.h"

namespace psgd {
namespace ps {

// Shard `index` of a client (named "shard <index>" in errors), reached
// through a request handler of its own. Calls are made on the caller's
// thread and have ended when they return, but for a pull, which waits for
// its step until its deadline (then DEADLINE_EXCEEDED) in Await. Other
// calls' deadlines are not used: nothing in process takes that long.
class InProcessShardChannel final : public ShardChannel {
 public:
  // `wire`: the dtypes the shard's side takes and answers in, as a
  // server's ServerOptions::wire.
  InProcessShardChannel(int index, ParameterShard* shard, WireDTypes wire = {});

  const std::string& name() const override { return name_; }
  std::unique_ptr<ShardCall> Initialize(
      const wire::InitializeRequest& request, absl::Time deadline,
      wire::InitializeResponse* response) override;
  std::unique_ptr<ShardCall> Join(const wire::JoinRequest& request,
                                  absl::Time deadline,
                                  wire::MembershipResponse* response) override;
  std::unique_ptr<ShardCall> Leave(const wire::LeaveRequest& request,
                                   absl::Time deadline,
                                   wire::MembershipResponse* response) override;
  std::unique_ptr<ShardCall> Status(const wire::StatusRequest& request,
                                    absl::Time deadline,
                                    wire::StatusResponse* response) override;
  std::unique_ptr<ShardCall> Shutdown(
      const wire::ShutdownRequest& request, absl::Time deadline,
      wire::ShutdownResponse* response) override;
  std::unique_ptr<ShardCall> Rollback(
      const wire::RollbackRequest& request, absl::Time deadline,
      wire::RollbackResponse* response) override;
  std::unique_ptr<ShardCall> Checkpoint(
      const wire::CheckpointRequest& request, absl::Time deadline,
      wire::CheckpointResponse* response) override;
  std::unique_ptr<ShardCall> LeaseData(
      const wire::LeaseDataRequest& request, absl::Time deadline,
      wire::LeaseDataResponse* response) override;
  // Serving unless the shard is agreeing on a checkpoint or has shut down,
  // as a ps_server's health service says.
  std::unique_ptr<ShardCall> Health(absl::Time deadline,
                                    bool* serving) override;
  std::unique_ptr<ShardExchange> NewExchange() override;

 private:
  class Exchange;

  const std::string name_;
  ParameterShard* const shard_;
  ShardRequestHandler handler_;
};

// Shard 0 of `shards`, a cluster in this process, sends its decisions
// (docs/PS.md, "One decision per push") straight to the others, which must
// outlive it or be linked again. InProcessPsClient::Create links the shards
// it is given; a test that makes its channels itself calls this.
void LinkShardsInProcess(std::vector<ParameterShard*> shards);

class InProcessPsClient final : public ShardedPsClient {
 public:
  // shards[i] serves shard i of `placement`. Every request carries
  // `cluster`; worker_id is this client's worker (-1: none, for a chief or
  // an evaluator that only initialises, pulls or shuts down). `wire`: the
  // dtypes of both sides, the client's and the shards' (their request
  // handlers'), as a cluster config gives the servers and the workers the
  // same. INVALID_ARGUMENT when the number of shards differs from the
  // placement's or a shard is null.
  static absl::StatusOr<std::unique_ptr<InProcessPsClient>> Create(
      std::vector<ParameterShard*> shards, Placement placement,
      std::string cluster, int worker_id, WireDTypes wire = {});
  // With every client option given, and the dtypes the shards' side
  // serves (`served`; e.g. other than the client's, to see them refused).
  static absl::StatusOr<std::unique_ptr<InProcessPsClient>> Create(
      std::vector<ParameterShard*> shards, Placement placement,
      ShardedClientOptions options, WireDTypes served = {});

 private:
  using ShardedPsClient::ShardedPsClient;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_TESTING_IN_PROCESS_CLIENT_H_
