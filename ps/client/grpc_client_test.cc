// The gRPC PsClient against PsGrpcServers on loopback: the concurrency
// scenarios over real gRPC, and the errors a worker sees. Tagged no_tsan:
// Debian's gRPC is not built with ThreadSanitizer, whose reports would be
// about gRPC's internals; in_process_client_test runs the same scenarios
// under tsan.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>

#include "common/grpc_status.h"
#include "ps/client/grpc_channel.h"
#include "ps/client/remote_client.h"
#include "ps/server/grpc_server.h"
#include "ps/testing/ps_client_test_util.h"
#include "ps/wire/shared_memory.h"

namespace psgd {
namespace ps {
namespace {

using testing::Scenario;

// The cluster's token, as every server requires one.
constexpr char kToken[] = "grpc-client-test-token";

// What a raw stub's channel carries: the token, in plaintext.
ClientCredentials TokenCredentials() {
  ClientCredentials c;
  c.token = kToken;
  return c;
}

// Shard servers on 127.0.0.1 with OS-chosen ports.
struct GrpcCluster {
  GrpcCluster(const Scenario& sc, int num_shards,
              DType wire_gradients = DType::kFloat32,
              DType wire_weights = DType::kFloat32)
      : wire_gradients(wire_gradients), wire_weights(wire_weights) {
    for (int i = 0; i < num_shards; ++i) {
      ServerOptions o;
      o.shard = testing::ScenarioOptions(sc, i, num_shards);
      o.listen_address = "127.0.0.1:0";
      o.wire.gradients = wire_gradients;
      o.wire.weights = wire_weights;
      o.security.token = kToken;
      auto server = PsGrpcServer::Start(o);
      REQUIRE(server.ok());
      addresses.push_back((*server)->address());
      servers.push_back(*std::move(server));
    }
    // Shard 0's decisions reach the others over gRPC.
    REQUIRE(servers[0]->ConnectPeers(addresses).ok());
  }
  std::unique_ptr<RemotePsClient> Client(int worker,
                                         const std::string& cluster) {
    RemoteClientOptions o;
    o.addresses = addresses;
    o.cluster = cluster;
    o.worker_id = worker;
    o.variables = testing::ScenarioModel();
    o.split_threshold_bytes = testing::kScenarioSplitThreshold;
    o.rpc_timeout = absl::Seconds(30);
    o.wire = {wire_gradients, wire_weights};
    o.shared_memory = shared_memory;
    o.security.token = kToken;
    auto client = RemotePsClient::Create(o);
    REQUIRE(client.ok());
    return *std::move(client);
  }
  testing::ClientFactory Factory() {
    return [this](int worker) { return Client(worker, "scenario"); };
  }
  // A client of no worker that has initialised the shards with `values`.
  template <typename Values>
  std::unique_ptr<RemotePsClient> InitializedChief(const Values& values) {
    auto chief = Client(-1, "scenario");
    REQUIRE(chief->Initialize(values.Const()).ok());
    return chief;
  }

  const DType wire_gradients, wire_weights;
  // The clients offer shared memory (wire { shared_memory }).
  bool shared_memory = false;
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<PsGrpcServer>> servers;
};

// The scenario model's variables, held by the test.
using Values = testing::ScenarioValues;

TEST_CASE("grpc: sync N=M, threads x hundreds of steps over 2 shards") {
  for (int workers : {2, 8}) {
    const Scenario sc = testing::SyncScenario(workers, 300);
    GrpcCluster cluster(sc, 2);
    RunScenario(sc, cluster.Factory());
  }
}

TEST_CASE("grpc: sync with backup workers and async") {
  for (const Scenario& sc : {testing::BackupScenario(8, 6, 150),
                             testing::AsyncScenario(8, 150, true)}) {
    GrpcCluster cluster(sc, 2);
    RunScenario(sc, cluster.Factory());
  }
}

TEST_CASE("grpc: pushes in parts and pulls per variable (overlap)") {
  for (Scenario sc :
       {testing::SyncScenario(4, 60), testing::BackupScenario(5, 3, 60),
        testing::AsyncScenario(4, 60, false)}) {
    sc.parts = true;
    GrpcCluster cluster(sc, 2);
    RunScenario(sc, cluster.Factory());
  }
}

TEST_CASE("grpc: shared memory on one machine: the same scenarios") {
  std::vector<Scenario> scenarios = {testing::SyncScenario(4, 100),
                                     testing::BackupScenario(5, 3, 60),
                                     testing::AsyncScenario(4, 100, true)};
  for (Scenario sc :
       {testing::SyncScenario(4, 60), testing::AsyncScenario(4, 60, false)}) {
    sc.parts = true;
    scenarios.push_back(sc);
  }
  for (const Scenario& sc : scenarios) {
    GrpcCluster cluster(sc, 2);
    cluster.shared_memory = true;
    RunScenario(sc, cluster.Factory());
    // The scenarios went through the regions, not around them: every
    // server mapped the workers' (kept until they are idle for 2 minutes).
    for (const auto& server : cluster.servers) {
      CHECK(server->service()->shared_segments_mapped() > 0);
    }
  }
}

// One worker's steps of the scenario model (gradient g at every step);
// the weights it pulls at the end and its payload counters.
struct SharedRun {
  Values weights;
  RemotePsClient::PayloadBytes bytes;
};
SharedRun ThreeSteps(GrpcCluster* cluster) {
  Values init;
  auto chief = cluster->InitializedChief(init);
  auto client = cluster->Client(0, "scenario");
  REQUIRE(client->Join().ok());
  SharedRun run;
  Values grads;
  for (float& x : grads.w) x = 0.125f;
  for (float& x : grads.b) x = -0.5f;
  for (float& x : grads.v) x = 2.0f;
  absl::StatusOr<ModelVersion> v =
      client->Pull(ModelVersion::AtLeast(2, 0), absl::Now() + absl::Seconds(30),
                   run.weights.Mutable());
  REQUIRE(v.ok());
  for (int step = 0; step < 3; ++step) {
    REQUIRE(client->Push(*v, grads.Const()).ok());
    v = client->Pull(v->Next(), absl::Now() + absl::Seconds(30),
                     run.weights.Mutable());
    REQUIRE(v.ok());
  }
  run.bytes = client->payload_bytes();
  REQUIRE(client->Leave().ok());
  return run;
}

TEST_CASE("grpc: shared memory carries the tensors; a refusal falls back") {
  const Scenario sc = testing::SyncScenario(1, 3);
  GrpcCluster plain(sc, 2);
  const SharedRun expected = ThreeSteps(&plain);
  CHECK(expected.bytes.shared_sent == 0);
  CHECK(expected.bytes.shared_received == 0);
  const int64_t tensor_bytes = (64 * 8 + 8 + 16 * 4) * 4;

  SECTION("the server opens the segments") {
    GrpcCluster cluster(sc, 2);
    cluster.shared_memory = true;
    const SharedRun run = ThreeSteps(&cluster);
    CHECK(run.weights.w == expected.weights.w);
    CHECK(run.weights.b == expected.weights.b);
    CHECK(run.weights.v == expected.weights.v);
    // Every push, and every pull after the first (which learns the size
    // its region needs), through shared memory.
    CHECK(run.bytes.shared_sent == 3 * tensor_bytes);
    CHECK(run.bytes.shared_received == 3 * tensor_bytes);
    // What the socket carried: names and offsets, not the tensors (but
    // the first pull's): at least two models' bytes fewer each way than
    // without shared memory (three were moved; a segment's description per
    // call and an offset per tensor came instead).
    CHECK(run.bytes.sent - run.bytes.shared_sent <
          expected.bytes.sent - 2 * tensor_bytes);
    CHECK(run.bytes.received - run.bytes.shared_received >= tensor_bytes);
    CHECK(run.bytes.received - run.bytes.shared_received <
          expected.bytes.received - 2 * tensor_bytes);
  }
  SECTION("a server that cannot open them (another machine) gets bytes") {
    GrpcCluster cluster(sc, 2);
    cluster.shared_memory = true;
    for (auto& server : cluster.servers) {
      server->service()->SetSharedMemoryUnreachableForTesting();
    }
    const SharedRun run = ThreeSteps(&cluster);
    CHECK(run.weights.w == expected.weights.w);
    CHECK(run.weights.b == expected.weights.b);
    CHECK(run.weights.v == expected.weights.v);
    CHECK(run.bytes.shared_sent == 0);
    CHECK(run.bytes.shared_received == 0);
    // The socket carried every tensor.
    CHECK(run.bytes.sent >= 3 * tensor_bytes);
    CHECK(run.bytes.received >= 4 * tensor_bytes);
  }
}

TEST_CASE(
    "grpc: a non-finite gradient in shared memory is refused and counted") {
  // One shard: its push is applied at once, from the copy the transport
  // checked on its way out of the region (TensorBytes::checked).
  GrpcCluster cluster(testing::SyncScenario(1, 3), 1);
  cluster.shared_memory = true;
  Values init;
  auto chief = cluster.InitializedChief(init);
  auto client = cluster.Client(0, "scenario");
  REQUIRE(client->Join().ok());
  Values weights;
  absl::StatusOr<ModelVersion> v =
      client->Pull(ModelVersion::AtLeast(1, 0), absl::Now() + absl::Seconds(30),
                   weights.Mutable());
  REQUIRE(v.ok());
  const Values before = weights;
  Values grads;
  for (float& x : grads.w) x = 0.125f;
  for (float& x : grads.b) x = -0.5f;
  for (float& x : grads.v) x = 2.0f;
  grads.w[37] = std::numeric_limits<float>::quiet_NaN();
  absl::Status refused = client->Push(*v, grads.Const()).status();
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(refused.message())
            .find("non-finite value nan at element "
                  "37") != std::string::npos);
  // The push went through the region (not the socket), and the shard
  // counted it refused; nothing was applied.
  CHECK(client->payload_bytes().shared_sent > 0);
  absl::StatusOr<std::vector<ShardStatus>> status = chief->Status();
  REQUIRE(status.ok());
  CHECK((*status)[0].counters.refused == 1);
  CHECK((*status)[0].counters.applied == 0);
  CHECK((*status)[0].step == 0);
  // The same gradients, finite, are applied.
  grads.w[37] = 0.125f;
  REQUIRE(client->Push(*v, grads.Const()).ok());
  v = client->Pull(v->Next(), absl::Now() + absl::Seconds(30),
                   weights.Mutable());
  REQUIRE(v.ok());
  for (size_t i = 0; i < weights.w.size(); ++i) {
    INFO("w[" << i << "]");
    REQUIRE(std::isfinite(weights.w[i]));
    REQUIRE(weights.w[i] != before.w[i]);
  }
  status = chief->Status();
  REQUIRE(status.ok());
  CHECK((*status)[0].counters.applied == 1);
  REQUIRE(client->Leave().ok());
}

TEST_CASE("grpc: a push naming a segment the server cannot open is refused") {
  GrpcCluster cluster(testing::SyncScenario(1, 1), 1);
  Values init;
  auto chief = cluster.InitializedChief(init);
  auto stub = wire::ParameterServer::NewStub(
      CreatePsChannel(cluster.addresses[0], 64 << 20, TokenCredentials()));
  wire::PushRequest request;
  request.set_cluster("scenario");
  request.set_worker_id(0);
  wire::SharedMemory* shm = request.mutable_shared_memory();
  shm->set_pid(getpid());
  shm->set_fd(0);  // stdin: no psgd region
  shm->set_size(4096);
  wire::TensorData* t = request.add_gradients();
  t->mutable_spec()->set_name("b");
  t->mutable_spec()->add_shape(8);
  t->set_dtype(wire::DT_FLOAT32);
  t->mutable_shared()->set_offset(64);
  t->mutable_shared()->set_size(32);
  wire::PushResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status s = stub->Push(&ctx, request, &response);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(s.error_message().find("shared memory segment of process") !=
        std::string::npos);
  // The reason crosses gRPC (a worker falls back to bytes by it).
  const absl::Status got = FromGrpcStatus(s);
  CHECK(IsSharedMemoryRefusal(got));
  CHECK(SharedMemoryRefusalOf(got) != SharedMemoryRefusal::kNone);
  // Nothing changed: the shard is still at step 0.
  auto status = chief->Status();
  REQUIRE(status.ok());
  CHECK((*status)[0].step == 0);
}

TEST_CASE("grpc: a pull of an unknown tensor is refused naming it") {
  GrpcCluster cluster(testing::SyncScenario(1, 1), 1);
  Values init;
  auto chief = cluster.InitializedChief(init);
  // A PullRequest by hand: the client asks only for tensors it knows.
  auto channel = CreatePsChannel(cluster.addresses[0], int64_t{64} << 20,
                                 TokenCredentials());
  auto stub = wire::ParameterServer::NewStub(channel);
  for (const auto& names :
       std::vector<std::vector<std::string>>{{"nope"}, {"b", "b"}}) {
    wire::PullRequest request;
    request.set_cluster("scenario");
    request.set_worker_id(-1);
    for (const std::string& n : names) request.add_variables(n);
    wire::PullResponse response;
    grpc::ClientContext ctx;
    grpc::Status s = stub->Pull(&ctx, request, &response);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(), Catch::Contains("'" + names[0] + "'"));
  }
}

TEST_CASE("grpc: a worker of another cluster gets a clear error") {
  Scenario sc;
  GrpcCluster cluster(sc, 2);
  absl::Status s = cluster.Client(0, "other")->Join();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find("request for cluster 'other' reached shard 0 of "
                         "cluster 'scenario'") != absl::string_view::npos);
}

TEST_CASE("grpc: pulls wait for the step, up to their deadline") {
  GrpcCluster cluster(testing::SyncScenario(2, 1), 2);
  Values init;
  auto chief = cluster.InitializedChief(init);
  auto w0 = cluster.Client(0, "scenario");
  auto w1 = cluster.Client(1, "scenario");
  REQUIRE(w0->Join().ok());
  REQUIRE(w1->Join().ok());

  // Nobody pushes: a pull for step 1 times out.
  Values got;
  auto late = w0->Pull(ModelVersion::AtLeast(2, 1),
                       absl::Now() + absl::Milliseconds(200), got.Mutable());
  CHECK(late.status().code() == absl::StatusCode::kDeadlineExceeded);

  // A pull for step 1 waits, and the second push releases it.
  const ModelVersion v0 = ModelVersion::AtLeast(2, 0);
  REQUIRE(w0->Push(v0, init.Const()).ok());
  absl::StatusOr<ModelVersion> waited;
  std::thread puller([&] {
    waited =
        w0->Pull(v0.Next(), absl::Now() + absl::Seconds(30), got.Mutable());
  });
  auto pushed = w1->Push(v0, init.Const());
  puller.join();
  REQUIRE(pushed.ok());
  CHECK(pushed->shards[0].outcome == PushOutcome::kApplied);
  REQUIRE(waited.ok());
  CHECK(waited->steps == std::vector<int64_t>{1, 1});

  // A copy of a push is refused with its typed reason, across gRPC.
  absl::StatusOr<PushResult> copy = w1->Push(v0, init.Const());
  CHECK(copy.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(PushRefusalOf(copy.status()) == PushRefusal::kAlreadyPushed);

  auto status = chief->Status();
  REQUIRE(status.ok());
  CHECK((*status)[1].step == 1);
  CHECK((*status)[1].live_workers == std::vector<int>{0, 1});
  CHECK((*status)[1].counters.applied == 1);
  CHECK((*status)[1].shard_index == 1);
}

TEST_CASE("grpc: an interrupted pull ends and the servers let it go") {
  GrpcCluster cluster(testing::SyncScenario(2, 1), 2);
  SECTION("bytes") {}
  SECTION("shared memory") { cluster.shared_memory = true; }
  testing::CheckInterruptedPulls(cluster.Factory());
}

TEST_CASE("grpc: Shutdown ends waiting pulls and the servers' wait") {
  GrpcCluster cluster(testing::SyncScenario(1, 1), 2);
  Values init;
  auto chief = cluster.InitializedChief(init);
  auto worker = cluster.Client(0, "scenario");
  absl::StatusOr<ModelVersion> waited;
  std::thread puller([&] {
    waited = worker->Pull(ModelVersion::AtLeast(2, 5),
                          absl::Now() + absl::Seconds(30), init.Mutable());
  });
  // Once both servers hold the pull, the shutdown ends it.
  for (;;) {
    absl::StatusOr<std::vector<ShardStatus>> status = chief->Status();
    REQUIRE(status.ok());
    if ((*status)[0].pulls_waiting == 1 && (*status)[1].pulls_waiting == 1) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  REQUIRE(chief->Shutdown("training is over").ok());
  puller.join();
  CHECK(waited.status().code() == absl::StatusCode::kCancelled);
  for (auto& server : cluster.servers) {
    CHECK(server->WaitForShutdown(absl::Now() + absl::Seconds(10)));
  }
}

// testing::TwoWireSteps over gRPC.
Values TwoSteps(DType wire_gradients, DType wire_weights) {
  GrpcCluster cluster(testing::SyncScenario(2, 2), 2, wire_gradients,
                      wire_weights);
  return testing::TwoWireSteps(cluster.Factory());
}

TEST_CASE("grpc: bfloat16 and float16 on the wire, float32 on the servers") {
  testing::CheckWireDTypes(TwoSteps);
  // A client that expects float32 weights refuses bfloat16 ones.
  GrpcCluster cluster(testing::SyncScenario(1, 1), 2, DType::kFloat32,
                      DType::kBFloat16);
  Values init;
  auto chief = cluster.InitializedChief(init);
  RemoteClientOptions o;
  o.addresses = cluster.addresses;
  o.cluster = "scenario";
  o.worker_id = 0;
  o.variables = testing::ScenarioModel();
  o.split_threshold_bytes = testing::kScenarioSplitThreshold;
  o.security.token = kToken;
  auto fp32_client = RemotePsClient::Create(o);
  REQUIRE(fp32_client.ok());
  absl::Status s = (*fp32_client)
                       ->Pull(ModelVersion::AtLeast(2, 0),
                              absl::Now() + absl::Seconds(30), init.Mutable())
                       .status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("as bfloat16") != absl::string_view::npos);
}

// A push sent with the generated stub, its gradient `b` as given.
absl::Status RawPush(const std::string& address, wire::DataType dtype,
                     const std::string& data, std::optional<float> scale,
                     int64_t elements = 8) {
  auto stub = wire::ParameterServer::NewStub(
      CreatePsChannel(address, 64 << 20, TokenCredentials()));
  wire::PushRequest request;
  request.set_cluster("scenario");
  request.set_worker_id(0);
  request.set_step(0);
  wire::TensorData* t = request.add_gradients();
  t->mutable_spec()->set_name("b");
  t->mutable_spec()->add_shape(elements);
  t->set_dtype(dtype);
  t->set_data(data);
  if (scale.has_value()) t->set_scale(*scale);
  wire::PushResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status s = stub->Push(&ctx, request, &response);
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

TEST_CASE("grpc: pushes that do not fit the wire setting are refused") {
  GrpcCluster cluster(testing::SyncScenario(2, 1), 1, DType::kFloat16,
                      DType::kFloat16);
  Values init;
  auto chief = cluster.InitializedChief(init);
  auto worker = cluster.Client(0, "scenario");
  REQUIRE(worker->Join().ok());
  const std::string& address = cluster.addresses[0];
  const std::string sixteen(16, '\0'), fifteen(15, '\0');
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    wire::DataType dtype;
    std::string data;
    std::optional<float> scale;
    std::string says;
  };
  const Case cases[] = {
      {wire::DT_FLOAT32, std::string(32, '\0'), std::nullopt,
       "gradient 'b' has dtype float32, but the cluster's wire setting is "
       "float16"},
      {wire::DT_BFLOAT16, sixteen, std::nullopt,
       "gradient 'b' has dtype "
       "bfloat16"},
      {wire::DT_FLOAT16, fifteen, 1.0f,
       "gradient 'b' of shape [8] needs 16 bytes of float16 but carries 15"},
      {wire::DT_FLOAT16, sixteen, 0.0f,
       "gradient 'b' of dtype float16 has "
       "scale 0"},
      {wire::DT_FLOAT16, sixteen, inf, "has scale inf"},
      {wire::DT_FLOAT16, sixteen, std::nanf(""), "has scale nan"},
      {wire::DT_FLOAT16, sixteen, std::nullopt, "carries no scale"},
  };
  // Another shape than the shard's "b" [8] is refused before anything is
  // decoded (a million float16s would be 4 MB of float32).
  {
    absl::Status s = RawPush(address, wire::DT_FLOAT16,
                             std::string(2 << 20, '\0'), 1.0f, 1 << 20);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().find("'b' of shape [1048576], but the shard's variable "
                           "has shape [8]") != absl::string_view::npos);
  }
  for (const Case& c : cases) {
    INFO(c.says);
    absl::Status s = RawPush(address, c.dtype, c.data, c.scale);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().find(c.says) != absl::string_view::npos);
    CHECK(s.message().find("shard 0: push from worker 0 for step 0") !=
          absl::string_view::npos);
  }
  // Nothing changed: no gradient gathered, no push recorded (the worker,
  // the only live one, may still push for step 0 and completes it).
  auto status = chief->Status();
  REQUIRE(status.ok());
  CHECK((*status)[0].step == 0);
  CHECK((*status)[0].pending_gradients == 0);
  CHECK((*status)[0].counters.aggregated == 0);
  REQUIRE(worker->Push(ModelVersion::AtLeast(1, 0), init.Const()).ok());
  status = chief->Status();
  REQUIRE(status.ok());
  CHECK((*status)[0].step == 1);
  CHECK((*status)[0].counters.applied == 1);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
