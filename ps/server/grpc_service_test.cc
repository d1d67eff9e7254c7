// The gRPC service and server through a raw stub: what arrives malformed on
// the wire is refused without changing the shard; messages above gRPC's
// default 4 MiB limit pass; health checking; the port file. Tagged no_tsan
// (Debian's gRPC is not tsan-built).
#include "ps/server/grpc_service.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "proto/reflection.pb.h"
#include "ps/server/grpc_server.h"

namespace psgd {
namespace ps {
namespace {

std::unique_ptr<wire::ParameterServer::Stub> Connect(
    const PsGrpcServer& server) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  args.SetMaxReceiveMessageSize(64 << 20);
  return wire::ParameterServer::NewStub(grpc::CreateCustomChannel(
      server.address(), grpc::InsecureChannelCredentials(), args));
}

void SetTensor(const std::string& name, const std::vector<float>& values,
               wire::TensorData* t) {
  t->mutable_spec()->set_name(name);
  t->mutable_spec()->add_shape(static_cast<int64_t>(values.size()));
  t->set_dtype(wire::DT_FLOAT32);
  t->set_data(reinterpret_cast<const char*>(values.data()),
              values.size() * sizeof(float));
}

template <typename Request, typename Response, typename Call>
grpc::Status Unary(const Request& request, Response* response, Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return call(&ctx, request, response);
}

// A server that takes calls without a token: these cases are about the
// service, not who may call it (tests/ps_security_test.cc is).
ServerOptions Insecure() {
  ServerOptions o;
  o.security.insecure = true;
  return o;
}

TEST_CASE("malformed tensors on the wire are refused, the shard unchanged") {
  // Whole pushes and parts (PushRequest.partial) alike.
  const bool partial = GENERATE(false, true);
  INFO("partial " << partial);
  ServerOptions o = Insecure();
  o.shard.cluster_name = "wire";
  auto server = PsGrpcServer::Start(o);
  REQUIRE(server.ok());
  auto stub = Connect(**server);

  wire::InitializeRequest init;
  init.set_cluster("wire");
  SetTensor("x", {1.0f, 2.0f, 3.0f, 4.0f}, init.add_variables());
  init.mutable_variables(0)->mutable_spec()->set_kind(wire::PARAMETER);
  wire::InitializeResponse init_reply;
  REQUIRE(Unary(init, &init_reply, [&](auto* c, auto& r, auto* p) {
            return stub->Initialize(c, r, p);
          }).ok());
  wire::JoinRequest join;
  join.set_cluster("wire");
  join.set_worker_id(0);
  wire::MembershipResponse joined;
  REQUIRE(Unary(join, &joined, [&](auto* c, auto& r, auto* p) {
            return stub->Join(c, r, p);
          }).ok());

  auto push = [&](wire::DataType dtype, int bytes) {
    wire::PushRequest request;
    request.set_cluster("wire");
    request.set_worker_id(0);
    request.set_step(0);
    request.set_partial(partial);
    wire::TensorData* g = request.add_gradients();
    SetTensor("x", {0.5f, 0.5f, 0.5f, 0.5f}, g);
    g->set_dtype(dtype);
    g->mutable_data()->resize(bytes);
    wire::PushResponse response;
    return Unary(request, &response, [&](auto* c, auto& r, auto* p) {
      return stub->Push(c, r, p);
    });
  };
  grpc::Status half = push(wire::DT_FLOAT16, 8);
  CHECK(half.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(half.error_message().find("gradient 'x' has dtype float16, but the "
                                  "cluster's wire setting is float32") !=
        std::string::npos);
  grpc::Status unspecified = push(wire::DATA_TYPE_UNSPECIFIED, 16);
  CHECK(unspecified.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(unspecified.error_message().find("unspecified or unknown") !=
        std::string::npos);
  grpc::Status unknown = push(static_cast<wire::DataType>(42), 16);
  CHECK(unknown.error_message().find("has dtype 42") != std::string::npos);
  grpc::Status truncated = push(wire::DT_FLOAT32, 15);
  CHECK(truncated.error_message().find("carries 15") != std::string::npos);

  ShardStatus s = (*server)->shard()->Status();
  CHECK(s.step == 0);
  CHECK(s.pending_gradients == 0);
  // Only the truncated one reached the shard's checks: the wire dtype is
  // checked before the shard (ps/wire/wire_dtype.h).
  CHECK(s.counters.refused == 1);
  CHECK(push(wire::DT_FLOAT32, 16).ok());
  CHECK((*server)->shard()->Status().step == 1);
}

TEST_CASE("a variable above gRPC's default 4 MiB limit goes through") {
  auto server = PsGrpcServer::Start(Insecure());
  REQUIRE(server.ok());
  auto stub = Connect(**server);
  wire::InitializeRequest init;
  init.set_cluster("psgd");
  SetTensor("big", std::vector<float>(1 << 21, 0.25f), init.add_variables());
  init.mutable_variables(0)->mutable_spec()->set_kind(wire::PARAMETER);
  wire::InitializeResponse reply;
  grpc::Status s = Unary(init, &reply, [&](auto* c, auto& r, auto* p) {
    return stub->Initialize(c, r, p);
  });
  INFO(s.error_message());
  CHECK(s.ok());
  wire::PullRequest pull;
  pull.set_cluster("psgd");
  pull.set_worker_id(-1);
  wire::PullResponse weights;
  REQUIRE(Unary(pull, &weights, [&](auto* c, auto& r, auto* p) {
            return stub->Pull(c, r, p);
          }).ok());
  REQUIRE(weights.variables_size() == 1);
  CHECK(weights.variables(0).data().size() == (8u << 20));
}

// A raw call of `bytes` to the service's `method`, with `token` when not
// empty.
grpc::Status RawCall(const PsGrpcServer& server, const std::string& method,
                     const std::string& bytes, const std::string& token = "") {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  grpc::GenericStub generic(grpc::CreateCustomChannel(
      server.address(), grpc::InsecureChannelCredentials(), args));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  absl::Mutex mu;
  bool done = false;
  grpc::Status result;
  generic.UnaryCall(&ctx, "/psgd.ps.wire.ParameterServer/" + method,
                    grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      absl::MutexLock lock(&mu);
                      result = s;
                      done = true;
                    });
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(&done));
  return result;
}

// `n` empty entries of field `field`: 2 bytes each.
std::string EmptyEntries(int field, int64_t n) {
  std::string bytes;
  for (int64_t i = 0; i < n; ++i) {
    bytes.push_back(static_cast<char>((field << 3) | 2));
    bytes.push_back('\0');
  }
  return bytes;
}

TEST_CASE("each method's request has limits of its own, checked unparsed") {
  // The limits are the service's own (kStatusLimit, kApplyDecisionsLimit,
  // ...); the sizes here are this test's: a Status of 100 KiB, an
  // ApplyDecisions of 2,000 decisions (the relay sends at most 256 at a
  // time), a Commit of 100 KiB.
  ServerOptions o = Insecure();
  o.shard.cluster_name = "limits";
  auto server = PsGrpcServer::Start(o);
  REQUIRE(server.ok());
  wire::StatusRequest status;
  status.set_cluster(std::string(100 << 10, 'x'));
  grpc::Status s = RawCall(**server, "Status", status.SerializeAsString());
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(s.error_message() ==
        absl::StrCat("a Status request of ", status.ByteSizeLong(),
                     " bytes, more than its limit of 65536"));
  s = RawCall(**server, "ApplyDecisions", EmptyEntries(3, 2000));
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(s.error_message() ==
        "a ApplyDecisions request of 2000 entries of field 3, more than its "
        "limit of 256");
  wire::CommitRequest commit;
  commit.set_cluster(std::string(100 << 10, 'x'));
  s = RawCall(**server, "Commit", commit.SerializeAsString());
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(s.error_message() ==
        absl::StrCat("a Commit request of ", commit.ByteSizeLong(),
                     " bytes, more than its limit of 65536"));
  // Bytes that are no message: refused by the count, or by the parse.
  s = RawCall(**server, "ApplyDecisions", "\x1a\xff\xff\xff\x0f");
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() == "a ApplyDecisions request that is no message");
  s = RawCall(**server, "Status",
              std::string("\x0a\x05"
                          "ab"));
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StartsWith(s.error_message(),
                         "a Status request that cannot be parsed"));
  // Within the limits, every method still answers as before.
  status.set_cluster("limits");
  s = RawCall(**server, "Status", status.SerializeAsString());
  CHECK(s.ok());
  // Three decisions of no kind: refused before any is applied.
  wire::ApplyDecisionsRequest decisions;
  decisions.set_cluster("limits");
  s = RawCall(**server, "ApplyDecisions",
              decisions.SerializeAsString() + EmptyEntries(3, 3));
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StartsWith(s.error_message(),
                         "shard 0 (at step 0): decision 0 has no kind"));
  commit.set_cluster("limits");
  s = RawCall(**server, "Commit", commit.SerializeAsString());
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);  // one shard
  // DecidePush: a part is refused before the shard sees it, a whole push
  // by the shard (a lone one decides on Push).
  wire::PushRequest push;
  push.set_cluster("limits");
  push.set_worker_id(0);
  push.set_push_id(7);
  push.set_partial(true);
  s = RawCall(**server, "DecidePush", push.SerializeAsString());
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(s.error_message(), Catch::Contains("comes whole"));
  push.set_partial(false);
  s = RawCall(**server, "DecidePush", push.SerializeAsString());
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(s.error_message(), Catch::Contains("only shard 0 of a cluster"));
  CHECK((*server)->shard()->Status().step == 0);
}

TEST_CASE(
    "ApplyDecisions takes the servers' peer token, and nothing else does") {
  ServerOptions o = Insecure();
  o.security.insecure = false;
  o.security.token = "cluster-token";
  o.security.peer_token = "peer-token";
  o.shard.cluster_name = "peers";
  auto server = PsGrpcServer::Start(o);
  REQUIRE(server.ok());
  wire::ApplyDecisionsRequest decide;
  decide.set_cluster("peers");
  wire::Decision* d = decide.add_decisions();
  d->set_seq(1);
  d->mutable_sync_step()->set_lr_scale(std::nan(""));
  const std::string bytes = decide.SerializeAsString();
  // A worker's token: refused before the request is looked at.
  for (const std::string token : {"", "cluster-token", "other"}) {
    INFO(token);
    grpc::Status s = RawCall(**server, "ApplyDecisions", bytes, token);
    CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(absl::StartsWith(s.error_message(), "missing or wrong peer token"));
  }
  // The servers' token passes the check (a lone shard then takes no
  // decisions), and opens no other method.
  grpc::Status s = RawCall(**server, "ApplyDecisions", bytes, "peer-token");
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  wire::StatusRequest status;
  status.set_cluster("peers");
  s = RawCall(**server, "Status", status.SerializeAsString(), "peer-token");
  CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  s = RawCall(**server, "Status", status.SerializeAsString(), "cluster-token");
  CHECK(s.ok());
  // DecidePush is a worker's call: without the cluster's token, or with
  // the servers', refused before its bytes are parsed.
  wire::PushRequest push;
  push.set_cluster("peers");
  push.set_push_id(7);
  for (const std::string token : {"", "peer-token"}) {
    INFO(token);
    s = RawCall(**server, "DecidePush", push.SerializeAsString(), token);
    CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  CHECK((*server)->shard()->Status().step == 0);
  CHECK((*server)->service()->unauthenticated_calls() == 6);
}

TEST_CASE("health checking, the port file and a pull past its deadline") {
  ServerOptions o = Insecure();
  const char* tmp = std::getenv("TEST_TMPDIR");  // set by bazel test
  o.port_file = std::string(tmp != nullptr ? tmp : "/tmp") + "/ps_port";
  auto server = PsGrpcServer::Start(o);
  REQUIRE(server.ok());
  std::ifstream in(o.port_file);
  int port = 0;
  in >> port;
  CHECK(port == (*server)->port());

  auto channel = grpc::CreateChannel((*server)->address(),
                                     grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest check;
  grpc::health::v1::HealthCheckResponse answer;
  REQUIRE(Unary(check, &answer, [&](auto* c, auto& r, auto* p) {
            return health->Check(c, r, p);
          }).ok());
  CHECK(answer.status() == grpc::health::v1::HealthCheckResponse::SERVING);

  // Not initialised: the pull waits, and its deadline ends it.
  auto stub = wire::ParameterServer::NewStub(channel);
  wire::PullRequest pull;
  pull.set_cluster("psgd");
  wire::PullResponse weights;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(100)));
  CHECK(stub->Pull(&ctx, pull, &weights).error_code() ==
        grpc::StatusCode::DEADLINE_EXCEEDED);
  (*server)->Stop(absl::Seconds(1));
  CHECK((*server)->shard()->Status().shutting_down);
}

namespace reflection = ::psgd::testing::reflection;

// One request on gRPC's reflection stream, and its answer.
reflection::ServerReflectionResponse AskReflection(
    const std::shared_ptr<grpc::Channel>& channel,
    const reflection::ServerReflectionRequest& request) {
  const grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  std::unique_ptr<
      grpc::ClientReaderWriter<reflection::ServerReflectionRequest,
                               reflection::ServerReflectionResponse>>
      stream(grpc::internal::ClientReaderWriterFactory<
             reflection::ServerReflectionRequest,
             reflection::ServerReflectionResponse>::Create(channel.get(),
                                                           method, &ctx));
  reflection::ServerReflectionResponse response;
  REQUIRE(stream->Write(request));
  stream->WritesDone();
  REQUIRE(stream->Read(&response));
  CHECK(stream->Finish().ok());
  return response;
}

TEST_CASE("reflection lists the parameter server and health services") {
  auto server = PsGrpcServer::Start(Insecure());
  REQUIRE(server.ok());
  auto channel = grpc::CreateChannel((*server)->address(),
                                     grpc::InsecureChannelCredentials());
  reflection::ServerReflectionRequest request;
  request.set_list_services("*");
  reflection::ServerReflectionResponse listed = AskReflection(channel, request);
  REQUIRE(listed.has_list_services_response());
  std::set<std::string> names;
  for (const auto& service : listed.list_services_response().service()) {
    names.insert(service.name());
  }
  CHECK(names.count("psgd.ps.wire.ParameterServer") == 1);
  CHECK(names.count("grpc.health.v1.Health") == 1);

  // And it describes the service by name, as grpcurl asks.
  request.set_file_containing_symbol("psgd.ps.wire.ParameterServer");
  reflection::ServerReflectionResponse described =
      AskReflection(channel, request);
  REQUIRE(described.has_file_descriptor_response());
  CHECK(described.file_descriptor_response().file_descriptor_proto_size() >= 1);
  (*server)->Stop(absl::Seconds(1));
}

// Two shards over gRPC (cluster "two", sync, one worker), shard 0 sending
// its decisions to shard 1 with the servers' peer token; worker 0 joined
// on both; shard i holds "v<i>".
struct TwoShards {
  TwoShards() {
    std::vector<std::string> addresses;
    for (int i = 0; i < 2; ++i) {
      ServerOptions o;
      o.security.token = "cluster-token";
      o.security.peer_token = "peer-token";
      o.shard.cluster_name = "two";
      o.shard.num_shards = 2;
      o.shard.shard_index = i;
      auto server = PsGrpcServer::Start(o);
      REQUIRE(server.ok());
      addresses.push_back((*server)->address());
      servers.push_back(*std::move(server));
      stubs.push_back(Connect(*servers.back()));
    }
    REQUIRE(servers[0]->ConnectPeers(addresses).ok());
    for (int i = 0; i < 2; ++i) {
      wire::InitializeRequest init;
      init.set_cluster("two");
      SetTensor(absl::StrCat("v", i), {1.0f, 2.0f}, init.add_variables());
      init.mutable_variables(0)->mutable_spec()->set_kind(wire::PARAMETER);
      wire::InitializeResponse init_reply;
      REQUIRE(Call(i, init, &init_reply, &Stub::Initialize).ok());
      wire::JoinRequest join;
      join.set_cluster("two");
      join.set_worker_id(0);
      wire::MembershipResponse joined;
      REQUIRE(Call(i, join, &joined, &Stub::Join).ok());
    }
  }

  using Stub = wire::ParameterServer::Stub;
  // `method` of shard `i`'s stub with `token`.
  template <typename Request, typename Response, typename Method>
  grpc::Status Call(int i, const Request& request, Response* response,
                    Method method, const std::string& token = "cluster-token") {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    return ((*stubs[i]).*method)(&ctx, request, response);
  }
  // Worker 0's whole push `push_id` for step 0 to shard `i`.
  grpc::Status Stage(int i, uint64_t push_id, wire::PushResponse* response) {
    wire::PushRequest push;
    push.set_cluster("two");
    push.set_worker_id(0);
    push.set_step(0);
    push.set_push_id(push_id);
    SetTensor(absl::StrCat("v", i), {0.5f, 0.5f}, push.add_gradients());
    return Call(i, push, response, &Stub::Push);
  }
  ShardStatus Status(int i) { return servers[i]->shard()->Status(); }

  std::vector<std::unique_ptr<PsGrpcServer>> servers;
  std::vector<std::unique_ptr<wire::ParameterServer::Stub>> stubs;
};

TEST_CASE(
    "bad commits and decisions are refused naming the step and the shard, "
    "nothing applied, and the shards keep serving") {
  TwoShards two;
  wire::CommitRequest commit;
  commit.set_cluster("two");
  commit.set_worker_id(0);
  commit.set_step(0);
  commit.set_push_id(7);
  wire::PushResponse reply;

  // A commit of a push never staged.
  grpc::Status s = two.Call(0, commit, &reply, &TwoShards::Stub::Commit);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(s.error_message() ==
        "shard 0: commit of worker 0's push for step 0: push 7 is not staged "
        "here complete for that step");

  for (int i = 0; i < 2; ++i) {
    REQUIRE(two.Stage(i, 7, &reply).ok());
    CHECK(reply.staged());
  }
  // A commit sent to a follower.
  s = two.Call(1, commit, &reply, &TwoShards::Stub::Commit);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(s.error_message() ==
        "shard 1: commit of worker 0's push for step 0: only shard 0 of a "
        "cluster of several shards decides pushes");

  // Decisions from something that is not shard 0: no token, a worker's.
  wire::ApplyDecisionsRequest decisions;
  decisions.set_cluster("two");
  wire::Decision* step = decisions.add_decisions();
  step->set_seq(1);
  step->mutable_sync_step()->set_step(0);
  step->mutable_sync_step()->add_workers(0);
  step->mutable_sync_step()->add_push_ids(7);
  step->mutable_sync_step()->set_lr_scale(1.0);
  wire::ApplyDecisionsResponse applied;
  for (const std::string token : {"", "cluster-token"}) {
    INFO(token);
    s = two.Call(1, decisions, &applied, &TwoShards::Stub::ApplyDecisions,
                 token);
    CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(absl::StartsWith(s.error_message(), "missing or wrong peer token"));
  }
  // From a peer, a decision of no kind after a good one: neither applied.
  decisions.add_decisions()->set_seq(2);
  s = two.Call(1, decisions, &applied, &TwoShards::Stub::ApplyDecisions,
               "peer-token");
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() ==
        "shard 1 (at step 0): decision 2 has no kind this build knows "
        "(sync_step, async_push, left or dropped): its kind is unset");
  for (int i = 0; i < 2; ++i) {
    CHECK(two.Status(i).step == 0);
    CHECK(two.Status(i).counters.applied == 0);
  }
  CHECK(two.Status(1).counters.decisions_applied == 0);

  // The push is still staged on both: its commit completes the step on
  // shard 0, and shard 1 applies shard 0's decision.
  s = two.Call(0, commit, &reply, &TwoShards::Stub::Commit);
  REQUIRE(s.ok());
  CHECK(reply.outcome() == wire::APPLIED);
  REQUIRE(two.servers[0]->shard()->AwaitDecisionsDelivered(absl::Now() +
                                                           absl::Seconds(30)));
  for (int i = 0; i < 2; ++i) {
    CHECK(two.Status(i).step == 1);
    CHECK(two.Status(i).counters.applied == 1);
  }
  CHECK(two.Status(1).counters.decisions_applied == 1);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
