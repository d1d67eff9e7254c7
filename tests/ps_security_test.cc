// A parameter server with the cluster's token, and with TLS: a caller
// without the token, or with another, gets UNAUTHENTICATED for every RPC of
// the service and changes nothing; with it everything works; over TLS a
// client that trusts the servers' authority works and a plaintext one, or
// one trusting another authority, does not. The certificates come from
// tests/make_test_certs.sh (the openssl CLI). Tagged no_tsan: real gRPC.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/grpc_security.h"
#include "google/protobuf/descriptor.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "ps/client/grpc_channel.h"
#include "ps/client/remote_client.h"
#include "ps/server/grpc_server.h"
#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace {

using ps::testing::ShardPicture;
using ps::testing::TwoVariables;

constexpr char kCluster[] = "sec";
constexpr char kToken[] = "the-right-token";

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// ca.pem, server.pem, server.key, other_ca.pem in a fresh directory.
std::string MakeCerts(const std::string& name) {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  REQUIRE(runfiles != nullptr);
  const std::string dir = TempDir() + "/" + name;
  const std::string command =
      std::string(runfiles) + "/psgd/tests/make_test_certs.sh " + dir;
  REQUIRE(std::system(command.c_str()) == 0);
  return dir;
}

// What a worker does before it joins: waits until the server at `address`
// serves (PsClient::AwaitServing), reaching it as `security` says.
absl::Status AwaitServing(const std::string& address,
                          const SecurityOptions& security,
                          absl::Duration timeout) {
  ps::RemoteClientOptions o;
  o.addresses = {address};
  o.cluster = kCluster;
  o.security = security;
  absl::StatusOr<std::unique_ptr<ps::RemotePsClient>> client =
      ps::RemotePsClient::Create(o);
  if (!client.ok()) return client.status();
  return (*client)->AwaitServing(absl::Now() + timeout);
}

// A server of cluster kCluster, with `security`, whose shard holds the two
// test variables at step 1 with one gradient pending, workers 0 and 1 live:
// any change would show.
std::unique_ptr<ps::PsGrpcServer> BusyServer(const SecurityOptions& security) {
  ps::ServerOptions o;
  o.shard.cluster_name = kCluster;
  o.shard.replicas_to_aggregate = 2;
  o.shard.total_num_replicas = 3;
  o.security = security;
  auto server = ps::PsGrpcServer::Start(o);
  REQUIRE(server.ok());
  ps::ParameterShard& shard = *(*server)->shard();
  REQUIRE(shard.Initialize(ps::testing::InitialValues().Bytes()).ok());
  REQUIRE(shard.Join(0).ok());
  REQUIRE(shard.Join(1).ok());
  const TwoVariables g = TwoVariables::Constant(0.5f, -0.25f);
  REQUIRE(ps::testing::Push(shard, 0, 0, g).ok());
  REQUIRE(ps::testing::Push(shard, 1, 0, g)->outcome ==
          ps::PushOutcome::kApplied);
  REQUIRE(ps::testing::Push(shard, 0, 1, g)->outcome ==
          ps::PushOutcome::kAggregated);
  return *std::move(server);
}

std::shared_ptr<grpc::Channel> Channel(const ps::PsGrpcServer& server,
                                       const SecurityOptions& security) {
  absl::StatusOr<ClientCredentials> credentials =
      MakeClientCredentials(security);
  REQUIRE(credentials.ok());
  return ps::CreatePsChannel(server.address(), 64 << 20, *credentials);
}

void SetTensor(const std::string& name, const std::vector<int64_t>& shape,
               const std::vector<float>& values, ps::wire::TensorData* t) {
  t->mutable_spec()->set_name(name);
  t->mutable_spec()->mutable_shape()->Assign(shape.begin(), shape.end());
  t->set_dtype(ps::wire::DT_FLOAT32);
  t->set_data(reinterpret_cast<const char*>(values.data()),
              values.size() * sizeof(float));
}

// Each RPC of the service with a request that would change the shard (or
// read it) if it were taken; the status of each, by method name.
std::vector<std::pair<std::string, grpc::Status>> CallEveryRpc(
    const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = ps::wire::ParameterServer::NewStub(channel);
  std::vector<std::pair<std::string, grpc::Status>> out;
  auto call = [&](const std::string& name, auto rpc, auto request,
                  auto response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    request.set_cluster(kCluster);
    out.emplace_back(name, ((*stub).*rpc)(&ctx, request, &response));
  };
  ps::wire::InitializeRequest init;
  SetTensor("other", {3}, {1, 2, 3}, init.add_variables());
  call("Initialize", &ps::wire::ParameterServer::Stub::Initialize, init,
       ps::wire::InitializeResponse());
  ps::wire::PullRequest pull;
  pull.set_worker_id(2);
  call("Pull", &ps::wire::ParameterServer::Stub::Pull, pull,
       ps::wire::PullResponse());
  ps::wire::PushRequest push;
  push.set_worker_id(1);
  push.set_step(1);
  SetTensor("w", ps::testing::ShapeW(), std::vector<float>(6, 9.0f),
            push.add_gradients());
  SetTensor("b", ps::testing::ShapeB(), std::vector<float>(2, 9.0f),
            push.add_gradients());
  call("Push", &ps::wire::ParameterServer::Stub::Push, push,
       ps::wire::PushResponse());
  ps::wire::JoinRequest join;
  join.set_worker_id(2);
  call("Join", &ps::wire::ParameterServer::Stub::Join, join,
       ps::wire::MembershipResponse());
  ps::wire::LeaveRequest leave;
  leave.set_worker_id(1);  // would complete step 1
  call("Leave", &ps::wire::ParameterServer::Stub::Leave, leave,
       ps::wire::MembershipResponse());
  call("Status", &ps::wire::ParameterServer::Stub::Status,
       ps::wire::StatusRequest(), ps::wire::StatusResponse());
  ps::wire::ShutdownRequest shutdown;
  shutdown.set_reason("an intruder says so");
  call("Shutdown", &ps::wire::ParameterServer::Stub::Shutdown, shutdown,
       ps::wire::ShutdownResponse());
  return out;
}

// Every method the service declares (also ones added later), called with an
// empty request through a generic stub.
std::vector<std::pair<std::string, grpc::Status>> CallEveryMethodRaw(
    const std::shared_ptr<grpc::Channel>& channel) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          ps::wire::ParameterServer::service_full_name());
  REQUIRE(service != nullptr);
  grpc::GenericStub stub(channel);
  std::vector<std::pair<std::string, grpc::Status>> out;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method =
        "/" + service->full_name() + "/" + service->method(i)->name();
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::Slice empty;  // an empty message
    grpc::ByteBuffer request(&empty, 1), response;
    Notification done;
    grpc::Status status;
    stub.UnaryCall(&ctx, method, {}, &request, &response, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    out.emplace_back(method, status);
  }
  return out;
}

void ExpectAllUnauthenticated(
    const std::vector<std::pair<std::string, grpc::Status>>& results) {
  for (const auto& [method, status] : results) {
    INFO(method << ": " << status.error_code() << " "
                << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    // ApplyDecisions, the servers' own call, names the peer token it wants.
    CHECK(status.error_message() ==
          std::string(absl::EndsWith(method, "/ApplyDecisions")
                          ? kPeerUnauthenticatedMessage
                          : kUnauthenticatedMessage));
  }
}

// Everything the refused calls must leave as it was.
void ExpectUnchanged(ps::PsGrpcServer& server, const ShardPicture& before,
                     int64_t refused) {
  CHECK(ShardPicture::Of(*server.shard()) == before);
  const ps::ShardStatus s = server.shard()->Status();
  CHECK(s.step == 1);
  CHECK(s.pending_gradients == 1);
  CHECK(s.live_workers == std::vector<int>{0, 1});
  CHECK_FALSE(s.shutting_down);
  CHECK(s.counters.refused == refused);
}

TEST_CASE("without the token, or with another, every RPC is refused") {
  SecurityOptions security;
  security.token = kToken;
  auto server = BusyServer(security);
  const ShardPicture before = ShardPicture::Of(*server->shard());
  const int64_t refused = server->shard()->Status().counters.refused;

  SECTION("no token") {
    auto channel = Channel(*server, SecurityOptions());
    ExpectAllUnauthenticated(CallEveryRpc(channel));
    ExpectAllUnauthenticated(CallEveryMethodRaw(channel));
  }
  SECTION("another token") {
    SecurityOptions wrong;
    wrong.token = "the-wrong-token";
    ExpectAllUnauthenticated(CallEveryRpc(Channel(*server, wrong)));
    wrong.token = std::string(kToken) + "x";
    ExpectAllUnauthenticated(CallEveryRpc(Channel(*server, wrong)));
  }
  SECTION("the token without 'Bearer ', or twice") {
    auto stub =
        ps::wire::ParameterServer::NewStub(Channel(*server, SecurityOptions()));
    for (int variant = 0; variant < 2; ++variant) {
      grpc::ClientContext ctx;
      if (variant == 0) {
        ctx.AddMetadata("authorization", kToken);
      } else {
        ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
        ctx.AddMetadata("authorization", "Bearer another");
      }
      ps::wire::ShutdownRequest request;
      request.set_cluster(kCluster);
      ps::wire::ShutdownResponse response;
      CHECK(stub->Shutdown(&ctx, request, &response).error_code() ==
            grpc::StatusCode::UNAUTHENTICATED);
    }
  }
  ExpectUnchanged(*server, before, refused);
  // The health service needs no token (docs/CLUSTER.md, "Security").
  CHECK(AwaitServing(server->address(), SecurityOptions(), absl::Seconds(30))
            .ok());
}

TEST_CASE("with the token every RPC works") {
  SecurityOptions security;
  security.token = kToken;
  auto server = BusyServer(security);
  // The metadata as any gRPC client can send it.
  {
    auto stub =
        ps::wire::ParameterServer::NewStub(Channel(*server, SecurityOptions()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    ps::wire::StatusRequest request;
    request.set_cluster(kCluster);
    ps::wire::StatusResponse response;
    CHECK(stub->Status(&ctx, request, &response).ok());
    CHECK(response.step() == 1);
  }
  // Each RPC through the channels the workers use.
  std::vector<std::pair<std::string, grpc::Status>> results =
      CallEveryRpc(Channel(*server, security));
  for (const auto& [method, status] : results) {
    INFO(method << ": " << status.error_message());
    if (method == "Initialize") {
      // Taken, and refused by the shard for its other variable set.
      CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    } else {
      CHECK(status.ok());
    }
  }
  const ps::ShardStatus s = server->shard()->Status();
  CHECK(s.step == 2);  // the push completed step 1
  CHECK(s.shutting_down);
}

TEST_CASE("a client with the token trains over TLS; others cannot connect") {
  const std::string certs = MakeCerts("tls");
  SecurityOptions security;
  security.token = kToken;
  security.tls = true;
  security.tls_cert_file = certs + "/server.pem";
  security.tls_key_file = certs + "/server.key";
  security.tls_ca_file = certs + "/ca.pem";
  auto server = BusyServer(security);
  const ShardPicture before = ShardPicture::Of(*server->shard());
  const int64_t refused = server->shard()->Status().counters.refused;

  SecurityOptions client;  // what the workers take from the config
  client.token = kToken;
  client.tls = true;
  client.tls_ca_file = security.tls_ca_file;
  CHECK(AwaitServing(server->address(), client, absl::Seconds(30)).ok());

  SECTION("plaintext") {
    SecurityOptions plain;
    plain.token = kToken;
    for (const auto& [method, status] : CallEveryRpc(Channel(*server, plain))) {
      INFO(method << ": " << status.error_message());
      CHECK(status.error_code() == grpc::StatusCode::UNAVAILABLE);
    }
    CHECK(AwaitServing(server->address(), plain, absl::Seconds(1)).code() ==
          absl::StatusCode::kDeadlineExceeded);
  }
  SECTION("trusting another authority") {
    SecurityOptions other = client;
    other.tls_ca_file = certs + "/other_ca.pem";
    for (const auto& [method, status] : CallEveryRpc(Channel(*server, other))) {
      INFO(method << ": " << status.error_message());
      CHECK(status.error_code() == grpc::StatusCode::UNAVAILABLE);
    }
  }
  SECTION("TLS without the token") {
    SecurityOptions no_token = client;
    no_token.token.clear();
    ExpectAllUnauthenticated(CallEveryRpc(Channel(*server, no_token)));
  }
  ExpectUnchanged(*server, before, refused);

  SECTION("the worker's client, with the token") {
    ps::RemoteClientOptions o;
    o.addresses = {server->address()};
    o.cluster = kCluster;
    o.worker_id = 1;
    o.variables = {{"w", {2, 3}, Initializer::Constant(0)},
                   {"b", {2}, Initializer::Constant(0)}};
    o.security = client;
    auto c = ps::RemotePsClient::Create(o);
    REQUIRE(c.ok());
    TwoVariables weights;
    absl::StatusOr<ps::ModelVersion> v = (*c)->Pull(
        ps::ModelVersion::AtLeast(1, 1), absl::Now() + absl::Seconds(30),
        {{"w", TensorView(weights.w.data(), ps::testing::ShapeW())},
         {"b", TensorView(weights.b.data(), ps::testing::ShapeB())}});
    REQUIRE(v.ok());
    CHECK(v->steps == std::vector<int64_t>{1});
    const TwoVariables g = TwoVariables::Constant(0.1f, 0.1f);
    absl::StatusOr<ps::PushResult> pushed = (*c)->Push(
        *v, {{"w", ConstTensorView(g.w.data(), ps::testing::ShapeW())},
             {"b", ConstTensorView(g.b.data(), ps::testing::ShapeB())}});
    REQUIRE(pushed.ok());
    CHECK(pushed->shards[0].outcome == ps::PushOutcome::kApplied);
    CHECK((*c)->Shutdown("done").ok());
    CHECK(server->shard()->Status().shutting_down);
  }
}

TEST_CASE("a server needs a token, or insecure said in so many words") {
  ps::ServerOptions o;
  o.listen_address = "127.0.0.1:0";
  absl::Status s = ps::PsGrpcServer::Start(o).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("no cluster token") != absl::string_view::npos);
  CHECK(s.message().find("insecure: true") != absl::string_view::npos);
  o.security.token = kToken;
  o.security.insecure = true;
  CHECK(ps::PsGrpcServer::Start(o).status().code() ==
        absl::StatusCode::kInvalidArgument);
  o.security.token.clear();
  auto insecure = ps::PsGrpcServer::Start(o);
  REQUIRE(insecure.ok());
  // Said: every call is taken.
  CHECK(
      AwaitServing((*insecure)->address(), SecurityOptions(), absl::Seconds(30))
          .ok());
}

TEST_CASE("a server whose TLS files cannot be read does not start") {
  ps::ServerOptions o;
  o.security.token = kToken;
  o.security.tls = true;
  o.security.tls_cert_file = "/nonexistent/server.pem";
  o.security.tls_key_file = "/nonexistent/server.key";
  absl::Status s = ps::PsGrpcServer::Start(o).status();
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK(s.message() == "tls key_file: no file '/nonexistent/server.key'");
  SecurityOptions client;
  client.tls = true;
  client.tls_ca_file = "/nonexistent/ca.pem";
  CHECK(MakeClientCredentials(client).status().message() ==
        "tls ca_file: no file '/nonexistent/ca.pem'");
}

}  // namespace
}  // namespace psgd
