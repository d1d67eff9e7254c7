// A parameter-server shard served over gRPC: the ParameterShard (of
// options.shard), its service (ps/server/grpc_service.h), gRPC's
// health-checking service and server reflection, listening on
// options.listen_address with the message size limits raised to
// options.shard.max_message_bytes, over TLS and taking only calls
// with the cluster's token when options.security says so (the health and
// reflection services need no token). It owns the shard's lifecycle
// (ps/server/server_lifecycle.h: lease expiry, logs, metrics files and the
// Prometheus page), so that a server in a test expires silent workers as
// ps_server's does. ps_server runs one; tests and ps_bench run several in
// one process.
//
// Thread-safety: thread-safe.
#ifndef PSGD_PS_SERVER_GRPC_SERVER_H_
#define PSGD_PS_SERVER_GRPC_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "ps/server/grpc_service.h"
#include "ps/server/server_lifecycle.h"
#include "ps/server/server_options.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

class PsGrpcServer {
 public:
  // Validates the options (ValidateServerOptions), creates the shard of
  // options.shard and starts serving; writes the port to options.port_file
  // when set. INVALID_ARGUMENT for bad options, NOT_FOUND / INTERNAL for TLS
  // files that cannot be read (bad PEM contents make the listen fail:
  // UNAVAILABLE), UNAVAILABLE when the address cannot be bound, INTERNAL when
  // the port file cannot be written. With per-host checkpoints
  // (options.shard.checkpoint.per_host) it first agrees with the other shards
  // on the checkpoint to restore (ps/server/checkpoint_agreement.h) and fails
  // as that does. Then starts the lifecycle with `lifecycle` (its run_dir, when
  // set, is also the service's) and fails as ShardLifecycle::Start does.
  static absl::StatusOr<std::unique_ptr<PsGrpcServer>> Start(
      const ServerOptions& options, const LifecycleOptions& lifecycle = {});

  // Stop(absl::ZeroDuration()) unless stopped.
  ~PsGrpcServer();
  PsGrpcServer(const PsGrpcServer&) = delete;
  PsGrpcServer& operator=(const PsGrpcServer&) = delete;

  // The port it listens on (the OS's choice for port 0).
  int port() const { return port_; }
  // "127.0.0.1:<port>" for a loopback or wildcard listen address, else the
  // listen address with the bound port.
  std::string address() const;

  // The options it started with.
  const ServerOptions& options() const { return options_; }
  ParameterShard* shard() { return shard_.get(); }
  PsGrpcService* service() { return service_.get(); }
  // Null without wire { data_plane: UCX }, or when UCX could not start.
  UcxDataPlane* ucx() { return ucx_.get(); }
  ShardLifecycle* lifecycle() { return lifecycle_.get(); }

  // Shard 0 of a cluster of several shards sends its decisions to the
  // others (docs/PS.md, "One decision per push") at options.ps_addresses;
  // a cluster started without them (tests, ps_bench: ports chosen by the
  // OS) names every shard's address here once all listen. A no-op on
  // other shards; errors as GrpcDecisionSender.
  absl::Status ConnectPeers(std::vector<std::string> addresses);

  // Waits until the shard is shut down (a Shutdown RPC) or `deadline`;
  // true when it is.
  bool WaitForShutdown(absl::Time deadline);

  // Shuts the shard down (waiting pulls end), marks the health service
  // NOT_SERVING and stops the gRPC server, cancelling calls still in
  // flight after `grace`; then stops the lifecycle, which records `reason`
  // in the summary. Idempotent.
  void Stop(absl::Duration grace,
            absl::string_view reason = "the server is stopping");

 private:
  explicit PsGrpcServer(const ServerOptions& options) : options_(options) {}

  const ServerOptions options_;
  std::string host_;
  int port_ = 0;
  // Destroyed in reverse order: the lifecycle and the server before the
  // service and the shard they call.
  std::unique_ptr<ParameterShard> shard_;
  std::unique_ptr<PsGrpcService> service_;
  // With wire { data_plane: UCX } when UCX started; destroyed after the
  // server (no Join uses it) and before the service (its pull weights).
  std::unique_ptr<UcxDataPlane> ucx_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ShardLifecycle> lifecycle_;
  Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_GRPC_SERVER_H_
