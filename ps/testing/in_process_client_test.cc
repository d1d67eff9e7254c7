// The in-process PsClient: the concurrency scenarios (this is the form of
// them that runs under ThreadSanitizer) and the client's own checks.
#include "ps/testing/in_process_client.h"

#include <catch2/catch.hpp>

#include "ps/testing/ps_client_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::Scenario;

// Shards for a scenario and a factory of clients over them.
struct InProcessCluster {
  InProcessCluster(const Scenario& sc, int num_shards,
                   DType wire_gradients = DType::kFloat32,
                   DType wire_weights = DType::kFloat32) {
    // The servers' side: what each shard's request handler takes and
    // answers in.
    wire.gradients = wire_gradients;
    wire.weights = wire_weights;
    for (int i = 0; i < num_shards; ++i) {
      ShardOptions o = testing::ScenarioOptions(sc, i, num_shards);
      auto shard = ParameterShard::Create(o);
      REQUIRE(shard.ok());
      shards.push_back(*std::move(shard));
    }
    auto p = PlaceVariables(testing::ScenarioModel(), num_shards,
                            testing::kScenarioSplitThreshold);
    REQUIRE(p.ok());
    placement = *p;
  }
  std::vector<ParameterShard*> Raw() {
    std::vector<ParameterShard*> raw;
    for (auto& s : shards) raw.push_back(s.get());
    return raw;
  }
  std::unique_ptr<PsClient> Client(int worker, const std::string& cluster) {
    auto c = InProcessPsClient::Create(Raw(), placement, cluster, worker, wire);
    REQUIRE(c.ok());
    return *std::move(c);
  }
  // A client whose wire dtypes are its own, not the shards'.
  std::unique_ptr<PsClient> ClientWithWire(int worker, DType wire_gradients,
                                           DType wire_weights) {
    ShardedClientOptions o;
    o.cluster = "scenario";
    o.worker_id = worker;
    o.wire = {wire_gradients, wire_weights};
    auto c = InProcessPsClient::Create(Raw(), placement, o, wire);
    REQUIRE(c.ok());
    return *std::move(c);
  }
  testing::ClientFactory Factory() {
    return [this](int worker) { return Client(worker, "scenario"); };
  }

  std::vector<std::unique_ptr<ParameterShard>> shards;
  Placement placement;
  WireDTypes wire;
};

TEST_CASE("in-process: sync N=M, threads x steps over 2 shards") {
  for (int workers : {2, 8}) {
    const Scenario sc = testing::SyncScenario(workers, 300);
    InProcessCluster cluster(sc, 2);
    RunScenario(sc, cluster.Factory());
  }
}

TEST_CASE("in-process: sync with backup workers, N < M") {
  for (int workers : {3, 8}) {
    const Scenario sc = testing::BackupScenario(workers, workers - 2, 150);
    InProcessCluster cluster(sc, 2);
    RunScenario(sc, cluster.Factory());
  }
}

TEST_CASE("in-process: async with a blocking staleness bound") {
  // Fast threads wait in their pulls for the slow ones; nothing deadlocks
  // (a worker that is done leaves) and the replay still matches.
  for (int workers : {2, 8}) {
    for (int64_t bound : {0, 2}) {
      Scenario sc = testing::AsyncScenario(workers, 100, false);
      sc.staleness_bound = bound;
      InProcessCluster cluster(sc, 2);
      RunScenario(sc, cluster.Factory());
    }
  }
}

TEST_CASE("in-process: async, plain and with lr scaled by staleness") {
  for (bool scale : {false, true}) {
    const Scenario sc = testing::AsyncScenario(8, 150, scale);
    InProcessCluster cluster(sc, 2);
    RunScenario(sc, cluster.Factory());
  }
}

TEST_CASE("in-process: pushes in parts and pulls per variable (overlap)") {
  for (Scenario sc :
       {testing::SyncScenario(4, 100), testing::BackupScenario(5, 3, 100),
        testing::AsyncScenario(4, 100, true)}) {
    sc.parts = true;
    InProcessCluster cluster(sc, 2);
    RunScenario(sc, cluster.Factory());
  }
}

TEST_CASE("in-process: a client of another cluster is refused") {
  Scenario sc;
  InProcessCluster cluster(sc, 2);
  auto client = cluster.Client(0, "other");
  absl::Status s = client->Join();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  // The sharded client names the shard in front, as over gRPC.
  CHECK(s.message() ==
        "join to shard 0: request for cluster 'other' reached shard 0 of "
        "cluster 'scenario'");
}

TEST_CASE("in-process: tensors that do not match the model are refused") {
  Scenario sc;
  InProcessCluster cluster(sc, 2);
  auto client = cluster.Client(0, "scenario");
  std::vector<float> w(64 * 8), b(8), v(16 * 4);
  std::vector<NamedConstTensorView> model = {
      {"w", ConstTensorView(w.data(), {64, 8})},
      {"b", ConstTensorView(b.data(), {8})},
      {"v", ConstTensorView(v.data(), {16, 4})}};
  REQUIRE(client->Initialize(model).ok());
  REQUIRE(client->Join().ok());
  const ModelVersion v0 = ModelVersion::AtLeast(2, 0);
  auto missing = client->Push(v0, {model[0], model[1]});
  CHECK(missing.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(missing.status().message() == "variable 'v' is missing");
  auto reshaped = model;
  reshaped[1].view = ConstTensorView(b.data(), {2, 4});
  CHECK(client->Push(v0, reshaped).status().message() ==
        "variable 'b' has shape [2, 4] but the model's has shape [8]");
  CHECK(client->Push(ModelVersion::AtLeast(3, 0), model).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // Nothing reached the shards.
  for (auto& shard : cluster.shards) {
    CHECK(shard->Status().counters.refused == 0);
    CHECK(shard->Status().pending_gradients == 0);
  }
}

TEST_CASE("in-process: initialise, pull back whole variables, shut down") {
  InProcessCluster cluster(testing::SyncScenario(1, 1), 2);
  auto client = cluster.Client(-1, "scenario");
  std::vector<float> w(64 * 8), b(8), v(16 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  for (size_t i = 0; i < v.size(); ++i) v[i] = -static_cast<float>(i);
  b.assign(8, 3.0f);
  REQUIRE(client
              ->Initialize({{"w", ConstTensorView(w.data(), {64, 8})},
                            {"b", ConstTensorView(b.data(), {8})},
                            {"v", ConstTensorView(v.data(), {16, 4})}})
              .ok());
  std::vector<float> w2(w.size()), b2(b.size()), v2(v.size());
  auto version =
      client->Pull(ModelVersion::AtLeast(2, 0), absl::Now() + absl::Seconds(10),
                   {{"v", TensorView(v2.data(), {16, 4})},
                    {"w", TensorView(w2.data(), {64, 8})},
                    {"b", TensorView(b2.data(), {8})}});
  REQUIRE(version.ok());
  CHECK(version->steps == std::vector<int64_t>{0, 0});
  CHECK(w2 == w);
  CHECK(b2 == b);
  CHECK(v2 == v);
  // "w" is split: each shard holds a part.
  CHECK(cluster.shards[0]->Status().num_parameters +
            cluster.shards[1]->Status().num_parameters ==
        64 * 8 + 8 + 16 * 4);
  REQUIRE(client->Shutdown("done").ok());
  for (auto& shard : cluster.shards) {
    CHECK(shard->AwaitShutdown(absl::Now()));
  }
}

using Values = testing::ScenarioValues;

// testing::TwoWireSteps in process: the in-process channels convert
// gradients and weights as the gRPC path does.
Values TwoSteps(DType wire_gradients, DType wire_weights) {
  InProcessCluster cluster(testing::SyncScenario(2, 2), 2, wire_gradients,
                           wire_weights);
  return testing::TwoWireSteps(cluster.Factory());
}

TEST_CASE("in-process: bfloat16 and float16 on the wire, as over gRPC") {
  testing::CheckWireDTypes(TwoSteps);
}

TEST_CASE("in-process: an interrupted pull ends and the shards let it go") {
  InProcessCluster cluster(testing::SyncScenario(2, 1), 2);
  testing::CheckInterruptedPulls(cluster.Factory());
}

TEST_CASE(
    "in-process: the request handler refuses what does not fit the "
    "wire setting, naming the tensor") {
  InProcessCluster cluster(testing::SyncScenario(2, 1), 1, DType::kFloat16,
                           DType::kBFloat16);
  Values init;
  REQUIRE(cluster.Client(-1, "scenario")->Initialize(init.Const()).ok());
  // float32 gradients to shards that take float16: the handler's check.
  auto fp32 = cluster.ClientWithWire(0, DType::kFloat32, DType::kBFloat16);
  REQUIRE(fp32->Join().ok());
  const ModelVersion v0 = ModelVersion::AtLeast(1, 0);
  absl::Status pushed = fp32->Push(v0, init.Const()).status();
  CHECK(pushed.code() == absl::StatusCode::kInvalidArgument);
  const std::string first =
      cluster.placement.slices[cluster.placement.shard_slices[0][0]].name;
  CHECK(pushed.message() ==
        "push to shard 0: shard 0: push from worker 0 for step 0: gradient '" +
            first +
            "' has dtype float32, but the cluster's wire setting is "
            "float16");
  // Nothing changed on the shard.
  ShardStatus status = cluster.shards[0]->Status();
  CHECK(status.pending_gradients == 0);
  CHECK(status.counters.aggregated == 0);
  CHECK(status.counters.applied == 0);
  // bfloat16 weights to a client that expects float32: the client's
  // assembler refuses them, naming the tensor.
  auto wants_fp32 =
      cluster.ClientWithWire(-1, DType::kFloat16, DType::kFloat32);
  Values got;
  absl::Status pulled =
      wants_fp32->Pull(v0, absl::Now() + absl::Seconds(30), got.Mutable())
          .status();
  CHECK(pulled.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(pulled.message()),
             Catch::StartsWith("pull from shard 0: shard 0 returned '" + first +
                               "' as bfloat16"));
  // The worker with the cluster's setting pushes for step 0 and completes
  // it (it is the only live worker).
  auto fp16 = cluster.Client(0, "scenario");
  REQUIRE(fp16->Push(v0, init.Const()).ok());
  CHECK(cluster.shards[0]->Status().counters.applied == 1);
}

TEST_CASE("in-process: a pull of an unknown tensor is refused naming it") {
  InProcessCluster cluster(testing::SyncScenario(1, 1), 1);
  Values init;
  REQUIRE(cluster.Client(-1, "scenario")->Initialize(init.Const()).ok());
  // A PullRequest by hand, through the channel: the client asks only for
  // tensors it knows.
  InProcessShardChannel channel(0, cluster.shards[0].get());
  for (const auto& names :
       std::vector<std::vector<std::string>>{{"nope"}, {"b", "b"}}) {
    wire::PullRequest request;
    request.set_cluster("scenario");
    request.set_worker_id(-1);
    for (const std::string& n : names) request.add_variables(n);
    std::unique_ptr<ShardExchange> exchange = channel.NewExchange();
    exchange->StartPull(request, absl::Now() + absl::Seconds(30));
    REQUIRE(exchange->Await().ok());
    std::vector<float*> model(cluster.placement.variables.size(), nullptr);
    ShardAssembler assembler(cluster.placement, 0, model);
    PulledVersion version;
    absl::Status s = exchange->ReadPull(&version, &assembler);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("'" + names[0] + "'"));
  }
}

}  // namespace
}  // namespace ps
}  // namespace psgd
