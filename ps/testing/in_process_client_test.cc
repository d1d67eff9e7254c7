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
  InProcessCluster(const Scenario& sc, int num_shards) {
    for (int i = 0; i < num_shards; ++i) {
      auto shard =
          ParameterShard::Create(testing::ScenarioOptions(sc, i, num_shards));
      REQUIRE(shard.ok());
      shards.push_back(*std::move(shard));
    }
    auto p = PlaceVariables(testing::ScenarioModel(), num_shards,
                            testing::kScenarioSplitThreshold);
    REQUIRE(p.ok());
    placement = *p;
  }
  std::unique_ptr<PsClient> Client(int worker, const std::string& cluster) {
    std::vector<ParameterShard*> raw;
    for (auto& s : shards) raw.push_back(s.get());
    auto c = InProcessPsClient::Create(raw, placement, cluster, worker);
    REQUIRE(c.ok());
    return *std::move(c);
  }
  testing::ClientFactory Factory() {
    return [this](int worker) { return Client(worker, "scenario"); };
  }

  std::vector<std::unique_ptr<ParameterShard>> shards;
  Placement placement;
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
  for (Scenario sc : {testing::SyncScenario(4, 100),
                      testing::BackupScenario(5, 3, 100),
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

}  // namespace
}  // namespace ps
}  // namespace psgd
