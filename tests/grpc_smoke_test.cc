// The build's gRPC wrappers work end to end: generated code from the system
// protoc and grpc_cpp_plugin, a callback-API server on a free loopback port,
// the health-checking service and server reflection.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "proto/echo.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace psgd {
namespace {

class EchoService final : public echo::Echo::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx,
                                 const echo::EchoMessage* request,
                                 echo::EchoMessage* reply) override {
    reply->set_payload(request->payload());
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

TEST_CASE("echo over loopback with health checking and reflection") {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  EchoService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  REQUIRE(port > 0);

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials());
  auto stub = echo::Echo::NewStub(channel);
  echo::EchoMessage request, reply;
  request.set_payload(std::string(1 << 20, 'x'));
  grpc::ClientContext ctx;
  grpc::Status status = stub->Echo(&ctx, request, &reply);
  REQUIRE(status.ok());
  CHECK(reply.payload() == request.payload());

  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  REQUIRE(health != nullptr);
  auto health_stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest check;
  grpc::health::v1::HealthCheckResponse answer;
  {
    grpc::ClientContext c;
    REQUIRE(health_stub->Check(&c, check, &answer).ok());
    CHECK(answer.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  }
  health->SetServingStatus(false);
  {
    grpc::ClientContext c;
    REQUIRE(health_stub->Check(&c, check, &answer).ok());
    CHECK(answer.status() ==
          grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }

  server->Shutdown();
}

}  // namespace
}  // namespace psgd
