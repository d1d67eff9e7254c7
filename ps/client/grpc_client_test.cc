// The gRPC PsClient against PsGrpcServers on loopback: the concurrency
// scenarios over real gRPC, and the errors a worker sees. Tagged no_tsan:
// Debian's gRPC is not built with ThreadSanitizer, whose reports would be
// about gRPC's internals; in_process_client_test runs the same scenarios
// under tsan.
#include "ps/client/grpc_client.h"

#include <catch2/catch.hpp>
#include <thread>

#include "ps/server/grpc_server.h"
#include "ps/testing/ps_client_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::Scenario;

// Shard servers on 127.0.0.1 with OS-chosen ports.
struct GrpcCluster {
  GrpcCluster(const Scenario& sc, int num_shards) {
    for (int i = 0; i < num_shards; ++i) {
      ServerOptions o = testing::ScenarioOptions(sc, i, num_shards);
      o.listen_address = "127.0.0.1:0";
      auto server = PsGrpcServer::Start(o);
      REQUIRE(server.ok());
      addresses.push_back((*server)->address());
      servers.push_back(*std::move(server));
    }
  }
  std::unique_ptr<GrpcPsClient> Client(int worker, const std::string& cluster) {
    GrpcClientOptions o;
    o.addresses = addresses;
    o.cluster = cluster;
    o.worker_id = worker;
    o.variables = testing::ScenarioModel();
    o.split_threshold_bytes = testing::kScenarioSplitThreshold;
    o.rpc_timeout = absl::Seconds(30);
    auto client = GrpcPsClient::Create(o);
    REQUIRE(client.ok());
    return *std::move(client);
  }
  testing::ClientFactory Factory() {
    return [this](int worker) { return Client(worker, "scenario"); };
  }
  // A client of no worker that has initialised the shards with `values`.
  template <typename Values>
  std::unique_ptr<GrpcPsClient> InitializedChief(const Values& values) {
    auto chief = Client(-1, "scenario");
    REQUIRE(chief->Initialize(values.Const()).ok());
    return chief;
  }

  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<PsGrpcServer>> servers;
};

// The scenario model's variables, held by the test.
struct Values {
  std::vector<float> w = std::vector<float>(64 * 8, 0.5f);
  std::vector<float> b = std::vector<float>(8, 0.25f);
  std::vector<float> v = std::vector<float>(16 * 4, -0.5f);
  std::vector<NamedConstTensorView> Const() const {
    return {{"w", ConstTensorView(w.data(), {64, 8})},
            {"b", ConstTensorView(b.data(), {8})},
            {"v", ConstTensorView(v.data(), {16, 4})}};
  }
  std::vector<NamedTensorView> Mutable() {
    return {{"w", TensorView(w.data(), {64, 8})},
            {"b", TensorView(b.data(), {8})},
            {"v", TensorView(v.data(), {16, 4})}};
  }
};

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
  // Most likely the pull waits by now; if not, it arrives after the
  // shutdown and is refused: CANCELLED either way.
  absl::SleepFor(absl::Milliseconds(100));
  REQUIRE(chief->Shutdown("training is over").ok());
  puller.join();
  CHECK(waited.status().code() == absl::StatusCode::kCancelled);
  for (auto& server : cluster.servers) {
    CHECK(server->WaitForShutdown(absl::Now() + absl::Seconds(10)));
  }
}

}  // namespace
}  // namespace ps
}  // namespace psgd
