// The gRPC adapter of one ParameterShard: converts each request
// (ps/wire.h), calls the shard and returns its status (common/grpc_status.h).
// Pulls that wait for a step hold no thread: the shard answers them from
// the thread that completes the step, and a pull whose gRPC deadline passes
// (or that the client cancels) is withdrawn.
//
// Thread-safety: thread-safe (gRPC calls it from many threads); the shard is
// not owned and must outlive the gRPC server that serves this service.
#ifndef PSGD_PS_GRPC_SERVICE_H_
#define PSGD_PS_GRPC_SERVICE_H_

#include "proto/ps.grpc.pb.h"
#include "ps/shard.h"

namespace psgd {
namespace ps {

class PsGrpcService final : public wire::ParameterServer::CallbackService {
 public:
  explicit PsGrpcService(ParameterShard* shard) : shard_(shard) {}

  grpc::ServerUnaryReactor* Initialize(
      grpc::CallbackServerContext* ctx, const wire::InitializeRequest* request,
      wire::InitializeResponse* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx,
                                 const wire::PullRequest* request,
                                 wire::PullResponse* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx,
                                 const wire::PushRequest* request,
                                 wire::PushResponse* response) override;
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx,
                                 const wire::JoinRequest* request,
                                 wire::MembershipResponse* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* ctx,
                                  const wire::LeaveRequest* request,
                                  wire::MembershipResponse* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx,
                                   const wire::StatusRequest* request,
                                   wire::StatusResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const wire::ShutdownRequest* request,
                                     wire::ShutdownResponse* response) override;

 private:
  ParameterShard* const shard_;  // Not owned.
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_GRPC_SERVICE_H_
