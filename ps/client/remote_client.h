// The PsClient of a worker that reaches S parameter-server processes over
// the network: the sharded client (ps/client/sharded_client.h) over one
// channel per server, a GrpcShardChannel (ps/client/grpc_channel.h), or with
// `ucx` a UcxShardChannel (ps/client/ucx_channel.h) that sends pushes,
// commits and pulls over UCX and every other call over its gRPC channel.
// Every call goes to all shards in parallel (callback stubs), pushes and
// pulls reuse their buffers from one call to the next, and each worker's
// client has its own connections.
//
// This header includes neither gRPC nor UCX (the channels are declared
// here, included by remote_client.cc).
//
// Thread-safety: thread-safe, as ShardedPsClient (a worker's PullPart and
// PushPart run on several threads at once, beside its other calls).
#ifndef PSGD_PS_CLIENT_REMOTE_CLIENT_H_
#define PSGD_PS_CLIENT_REMOTE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model_variables.h"
#include "common/security.h"
#include "ps/client/sharded_client.h"
#include "ps/state/placement.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {

// Declared only: remote_client.cc includes them (and gRPC and UCX), so that
// worker/session's headers and the Python binding compile without either.
class GrpcShardChannel;
class UcxShardChannel;

struct RemoteClientOptions {
  // Shard i listens at addresses[i] ("host:port").
  std::vector<std::string> addresses;
  // Sent with every request.
  std::string cluster = "psgd";
  // This client's worker; -1 for none (a chief that only initialises or
  // shuts down, an evaluator).
  int worker_id = -1;
  // The model and the servers' split threshold: the placement is computed
  // from them (ps/state/placement.h).
  std::vector<VariableSpec> variables;
  int64_t split_threshold_bytes = int64_t{1} << 20;
  // gRPC send and receive limit, as the servers': in [kMinMessageBytes,
  // kMaxMessageBytes] (at least gRPC's default receive limit, at most what
  // its int-sized limits hold).
  static constexpr int64_t kMinMessageBytes = int64_t{4} << 20;
  static constexpr int64_t kMaxMessageBytes = (int64_t{1} << 31) - 1;
  int64_t max_message_bytes = int64_t{256} << 20;
  // Deadline of every call but Pull (which takes its own).
  absl::Duration rpc_timeout = absl::Seconds(60);
  // Sent with Initialize: the run directory the servers and the other
  // workers use when they were given none (see proto/ps.proto).
  std::string run_dir;
  // The element types on the wire, as the servers' (the cluster config's
  // `wire` block): gradients are pushed as wire.gradients, pulled weights
  // must come as wire.weights (docs/PS.md, "Wire dtypes").
  WireDTypes wire;
  // The cluster config's `wire { shared_memory }`: offer each server a
  // shared memory segment for the tensors of pushes and pulls (used with
  // the servers on this machine, ps/client/grpc_channel.h).
  bool shared_memory = false;
  // The cluster config's `wire { data_plane: UCX ucx_transports }`: pushes
  // and pulls over UCX to the servers that offer it when this worker joins
  // (ps/client/ucx_channel.h); over gRPC where UCX cannot start here (said
  // once in the log).
  bool ucx = false;
  std::string ucx_transports = "tcp";
  // The cluster's token, sent with every call, and TLS (tls, tls_ca_file;
  // the certificate and key are the servers'). Default: neither.
  SecurityOptions security;
};

// OK when `options` may make a client, each bound checked here and only
// here; INVALID_ARGUMENT naming the field and its value otherwise: no
// address or an empty one, max_message_bytes out of its bounds,
// rpc_timeout <= 0, worker_id < -1. (The variables and the split
// threshold are PlaceVariables' to check, the security options
// MakeClientCredentials'.)
absl::Status CheckRemoteClientOptions(const RemoteClientOptions& options);

class RemotePsClient final : public ShardedPsClient {
 public:
  // CheckRemoteClientOptions, then computes the placement and opens a channel
  // to each address (connecting lazily). INVALID_ARGUMENT for bad options or
  // a bad variable list; NOT_FOUND / INTERNAL for a TLS CA file that cannot
  // be read. A server that refuses the token answers every call with
  // UNAUTHENTICATED.
  static absl::StatusOr<std::unique_ptr<RemotePsClient>> Create(
      RemoteClientOptions options);

  // The serialized bytes of the pushes and pulls so far: what this worker
  // sent (push requests, pull requests) and received (pull and push
  // responses), payload without gRPC's framing. Thread-safe.
  // The payload of pushes and pulls so far, all shards: what the requests
  // and replies carried, through the socket or shared memory; shared_*: the
  // part of it that went through shared memory; ucx_*: the part that went
  // over UCX (the data plane's headers included).
  struct PayloadBytes {
    int64_t sent = 0;
    int64_t received = 0;
    int64_t shared_sent = 0;
    int64_t shared_received = 0;
    int64_t ucx_sent = 0;
    int64_t ucx_received = 0;
  };
  PayloadBytes payload_bytes() const;

 private:
  RemotePsClient(Placement placement,
                 std::vector<std::unique_ptr<ShardChannel>> channels,
                 ShardedClientOptions options,
                 std::vector<const GrpcShardChannel*> grpc_channels,
                 std::vector<const UcxShardChannel*> ucx_channels)
      : ShardedPsClient(std::move(placement), std::move(channels),
                        std::move(options)),
        grpc_channels_(std::move(grpc_channels)),
        ucx_channels_(std::move(ucx_channels)) {}

  // The base's channels (or the gRPC channels inside its UCX ones), for
  // their byte counts. Not owned.
  const std::vector<const GrpcShardChannel*> grpc_channels_;
  const std::vector<const UcxShardChannel*> ucx_channels_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_REMOTE_CLIENT_H_
