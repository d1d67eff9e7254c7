#include "ps/server/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/grpc_security.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "ps/server/checkpoint_agreement.h"
#include "ps/server/decision_sender.h"

namespace psgd {
namespace ps {
namespace {

// OK when `path`'s directory is one only this user (or root) can write;
// the error names the port file.
absl::Status CheckPortFileDirectory(const std::string& path) {
  absl::Status s = CheckTrustedDirectory(DirectoryOf(path));
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("port file '", path,
                                             "' not written: ", s.message()));
}

// Writes "<port>\n" to `path` atomically, so that a reader never sees a
// partial number: WriteFileAtomically (a temporary file of a random name,
// O_EXCL | O_NOFOLLOW, renamed over `path`), never through a planted link,
// and only into a directory no other user can write.
absl::Status WritePortFile(const std::string& path, int port) {
  RETURN_IF_ERROR(CheckPortFileDirectory(path));
  return WriteFileAtomically(path, absl::StrCat(port, "\n"));
}

// The checks of `options` that only the server makes, before it listens:
// a port file that could not be written safely stops it before it serves
// anyone (checked again on writing); loopback is no boundary on a shared
// machine, so no token only when asked. Warns of a multi-shard cluster
// without a peer token.
absl::Status CheckBeforeListening(const ServerOptions& options) {
  if (!options.port_file.empty()) {
    RETURN_IF_ERROR(CheckPortFileDirectory(options.port_file));
  }
  if (options.security.token.empty() && !options.security.insecure) {
    return absl::InvalidArgumentError(
        "no cluster token: every server takes only calls with the cluster's "
        "token (a config makes one by default); to take every call, say so "
        "(config `security { insecure: true }`, ps_server --insecure)");
  }
  if (!options.security.token.empty() && options.security.insecure) {
    return absl::InvalidArgumentError(
        "both a cluster token and insecure: choose one");
  }
  if (!options.security.token.empty() && options.security.peer_token.empty() &&
      options.shard.num_shards > 1) {
    spdlog::warn(
        "no peer token: the servers take decisions (ApplyDecisions) from any "
        "holder of the cluster token, workers included; a cluster token_file "
        "(or "
        "security.peer_token_file) gives the servers one of their own");
  }
  return absl::OkStatus();
}

// Says who may drive an insecure server listening on `host`.
void WarnIfInsecure(const ServerOptions& options, const std::string& host) {
  if (!options.security.insecure) return;
  const bool loopback =
      host == "localhost" || host == "[::1]" || absl::StartsWith(host, "127.");
  spdlog::warn(
      "no cluster token (insecure): anyone who can reach {} may initialise, "
      "drive, roll back or shut down this server{}",
      options.listen_address,
      loopback ? " (every user of this machine)" : ", from other machines too");
}

// The UCX data plane of `shard` on `host` (the listen address's), or null
// where UCX does not start: the tensors then go over gRPC, said once
// (workers find no UCX in their Join's answer).
std::unique_ptr<UcxDataPlane> StartUcx(ParameterShard* shard,
                                       PullWeights* pull_weights,
                                       const ServerOptions& options,
                                       const std::string& host) {
  const bool any = host.empty() || host == "0.0.0.0" || host == "[::]";
  // UCX listens on IPv4 addresses (names resolve): IPv6 loopback as IPv4's.
  const std::string ucx_host = any               ? "0.0.0.0"
                               : host == "[::1]" ? "127.0.0.1"
                                                 : host;
  absl::StatusOr<std::unique_ptr<UcxDataPlane>> ucx = UcxDataPlane::Start(
      shard, pull_weights, options.wire, options.ucx_transports, ucx_host);
  if (!ucx.ok()) {
    spdlog::warn(
        "shard {}: the UCX data plane cannot start ({}); pushes and pulls go "
        "over gRPC",
        options.shard.shard_index, ucx.status().ToString());
    return nullptr;
  }
  spdlog::info("shard {}: pushes and pulls over UCX ({}) on {}:{}",
               options.shard.shard_index, (*ucx)->transports(), ucx_host,
               (*ucx)->port());
  return *std::move(ucx);
}

// The gRPC server of `service`, listening on options.listen_address (the
// bound port into *port), or null when it cannot listen.
std::unique_ptr<grpc::Server> BuildAndStartServer(
    const ServerOptions& options,
    std::shared_ptr<grpc::ServerCredentials> credentials,
    grpc::Service* service, int* port) {
  // Both are process-wide switches that apply to servers built after them.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT on Linux by default, so that a second server on
  // a port in use would start and share the connections: refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen_address, credentials, port);
  builder.RegisterService(service);
  const int64_t max_message_bytes = options.shard.max_message_bytes;
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  // What all calls together, authenticated or not, can make gRPC hold while
  // reading: a few of the largest messages, not whatever a flood sends.
  grpc::ResourceQuota quota("psgd-ps");
  quota.Resize(static_cast<size_t>(
      std::max<int64_t>(4 * max_message_bytes, int64_t{1} << 30)));
  builder.SetResourceQuota(quota);
  builder.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  return builder.BuildAndStart();
}

// Per-host checkpoints: `server` serves (ListCheckpoints for the other
// shards) but is not SERVING to health checks until the shards have agreed
// on a checkpoint and `shard` has restored it.
absl::Status AgreeBeforeServing(grpc::Server* server, ParameterShard* shard,
                                const ServerOptions& options) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(false);
  RETURN_IF_ERROR(
      AgreeAndRestore(shard, options,
                      absl::Now() + options.checkpoint_agree_timeout)
          .status());
  if (health != nullptr) health->SetServingStatus(true);
  return absl::OkStatus();
}

// Where the shard listens (the port the OS chose, for port 0) and, from a
// config, the address the others dial.
void LogListening(const ServerOptions& options, const std::string& host,
                  int port) {
  const ShardOptions& shard = options.shard;
  spdlog::info(
      "shard {} of {} of cluster '{}' ({} mode) listening on {}:{}{}",
      shard.shard_index, shard.num_shards, shard.cluster_name,
      std::string(ModeName(shard.mode)), host, port,
      options.ps_addresses.empty()
          ? ""
          : absl::StrCat(" (dialled as ",
                         options.ps_addresses[shard.shard_index], ")"));
}

// The Prometheus page of options.metrics_port, at the listen address's
// host, behind the cluster's token.
MetricsPageOptions MetricsPageOf(const ServerOptions& options) {
  MetricsPageOptions page;
  page.port = options.metrics_port;
  page.host =
      options.listen_address.substr(0, options.listen_address.rfind(':'));
  page.token = options.security.token;
  return page;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsGrpcServer>> PsGrpcServer::Start(
    const ServerOptions& options, const LifecycleOptions& lifecycle) {
  RETURN_IF_ERROR(ValidateLifecycleOptions(lifecycle));
  RETURN_IF_ERROR(CheckBeforeListening(options));
  // The server's fields and the shard's (Create checks the shard's again).
  RETURN_IF_ERROR(ValidateServerOptions(options));
  std::unique_ptr<PsGrpcServer> s(new PsGrpcServer(options));
  ASSIGN_OR_RETURN(s->shard_, ParameterShard::Create(options.shard));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(options.security));
  s->service_ = std::make_unique<PsGrpcService>(
      s->shard_.get(), options.security.token, options.security.peer_token,
      options.wire);
  // Before any Initialize can bring the chief's.
  if (!lifecycle.run_dir.empty()) {
    s->service_->SetRunDirIfUnset(lifecycle.run_dir);
  }
  s->service_->SetRunRoot(lifecycle.run_root);
  s->host_ =
      options.listen_address.substr(0, options.listen_address.rfind(':'));
  WarnIfInsecure(options, s->host_);
  if (options.ucx) {
    s->ucx_ = StartUcx(s->shard_.get(), s->service_->pull_weights(), options,
                       s->host_);
    if (s->ucx_ != nullptr) s->service_->SetUcxDataPlane(s->ucx_.get());
  }
  s->server_ = BuildAndStartServer(options, std::move(credentials),
                                   s->service_.get(), &s->port_);
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address));
  }
  if (s->shard_->agreeing()) {
    RETURN_IF_ERROR(
        AgreeBeforeServing(s->server_.get(), s->shard_.get(), options));
  }
  LogListening(options, s->host_, s->port_);
  if (options.shard.num_shards > 1 && !options.ps_addresses.empty()) {
    RETURN_IF_ERROR(s->ConnectPeers(options.ps_addresses));
  }
  ASSIGN_OR_RETURN(s->lifecycle_,
                   ShardLifecycle::Start(s->shard_.get(), s->service_.get(),
                                         lifecycle, MetricsPageOf(options)));
  if (!options.port_file.empty()) {
    RETURN_IF_ERROR(WritePortFile(options.port_file, s->port_));
  }
  return s;
}

PsGrpcServer::~PsGrpcServer() { Stop(absl::ZeroDuration()); }

std::string PsGrpcServer::address() const {
  const bool local = host_.empty() || host_ == "0.0.0.0" || host_ == "[::]" ||
                     host_ == "localhost" || host_ == "127.0.0.1";
  return absl::StrCat(local ? "127.0.0.1" : host_, ":", port_);
}

absl::Status PsGrpcServer::ConnectPeers(std::vector<std::string> addresses) {
  const ShardOptions& o = options_.shard;
  if (o.num_shards < 2 || o.shard_index != 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(DecisionRelay::Deliver deliver,
                   GrpcDecisionSender(options_, std::move(addresses)));
  shard_->ConnectFollowers(std::move(deliver));
  return absl::OkStatus();
}

bool PsGrpcServer::WaitForShutdown(absl::Time deadline) {
  return shard_->AwaitShutdown(deadline);
}

void PsGrpcServer::Stop(absl::Duration grace, absl::string_view reason) {
  {
    MutexLock lock(&stop_mu_);
    if (stopped_ || server_ == nullptr) return;
    stopped_ = true;
  }
  shard_->Shutdown("the server is stopping");
  if (grpc::HealthCheckServiceInterface* health =
          server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  if (lifecycle_ != nullptr) lifecycle_->Stop(reason);
}

}  // namespace ps
}  // namespace psgd
