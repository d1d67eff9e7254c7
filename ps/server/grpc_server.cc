#include "ps/server/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {
namespace {

// Writes "<port>\n" to `path` atomically (a temporary file, then rename),
// so that a reader never sees a partial number.
absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.good()) {
      return absl::InternalError(absl::StrCat("cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsGrpcServer>> PsGrpcServer::Start(
    const ServerOptions& options) {
  std::unique_ptr<PsGrpcServer> s(new PsGrpcServer());
  ASSIGN_OR_RETURN(s->shard_, ParameterShard::Create(options));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(options.security));
  s->service_ =
      std::make_unique<PsGrpcService>(s->shard_.get(), options.security.token);
  s->host_ =
      options.listen_address.substr(0, options.listen_address.rfind(':'));

  // Both are process-wide switches that apply to servers built after them.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address));
  }
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

bool PsGrpcServer::WaitForShutdown(absl::Time deadline) {
  return shard_->AwaitShutdown(deadline);
}

void PsGrpcServer::Stop(absl::Duration grace) {
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
}

}  // namespace ps
}  // namespace psgd
