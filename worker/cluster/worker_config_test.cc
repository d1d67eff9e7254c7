#include "worker/cluster/worker_config.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

TEST_CASE("a worker task's settings come from the config") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(R"(
    name: "w"
    ps { address: "127.0.0.1:1" }
    ps { address: "127.0.0.1:2" }
    worker { address: "127.0.0.1:3" }
    worker { address: "127.0.0.1:4" device: "gpu:1" threads: 3 }
    training { mode: SYNC replicas_to_aggregate: 1 batch_size: 64
               epochs: 2 eval_every: 50 eval_examples: 500 seed: 9
               max_seconds: 90 }
    data { source: CIFAR10 dir: "data/x" augment: false sharding: OWN_ORDER }
    security { token: "s3cret" }
    wire { gradients: BF16 overlap: true }
  )",
                                                       "w.pbtxt");
  REQUIRE(c.ok());
  absl::StatusOr<WorkerTaskConfig> w = WorkerTaskFromConfig(*c, 1);
  REQUIRE(w.ok());
  CHECK(w->client.wire.gradients == ps::DType::kBFloat16);
  CHECK(w->client.wire.weights == ps::DType::kFloat32);
  CHECK(w->loop.overlap);
  CHECK(w->backend == "gpu:1");
  CHECK(w->backend_options.threads == 3);
  CHECK(w->model == "cifar10_tutorial");
  CHECK(w->data.name == "cifar10");
  CHECK(w->data.data_dir == "data/x");
  CHECK(w->batches.batch_size == 64);
  CHECK(w->batches.epochs == 2);
  CHECK(w->batches.seed == 9);
  CHECK(w->batches.worker_index == 1);
  CHECK(w->batches.num_workers == 2);
  CHECK(w->batches.partition == BatcherOptions::Partition::kOwnOrder);
  CHECK_FALSE(w->batches.augment);
  CHECK(w->loop.worker_id == 1);
  CHECK_FALSE(w->loop.chief);
  CHECK(w->loop.sync);
  CHECK(w->loop.max_steps == 0);
  CHECK(w->loop.max_time == absl::Seconds(90));
  CHECK(w->loop.eval_every == 50);
  CHECK(w->loop.eval_examples == 500);
  CHECK(w->loop.ps_unavailable_timeout == absl::Minutes(5));
  CHECK(w->loop.checkpoint_every == absl::ZeroDuration());
  CHECK_FALSE(w->loop.final_checkpoint);
  CHECK(w->client.addresses ==
        std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:2"});
  CHECK(w->client.cluster == "w");
  CHECK(w->client.worker_id == 1);
  CHECK(w->client.variables.size() == 10);
  CHECK(w->client.security.token == "s3cret");
  CHECK_FALSE(w->client.security.tls);

  absl::StatusOr<WorkerTaskConfig> chief = WorkerTaskFromConfig(*c, 0);
  REQUIRE(chief.ok());
  CHECK(chief->loop.chief);
  CHECK(chief->backend == "cpu");
  CHECK(WorkerTaskFromConfig(*c, 2).status().message() ==
        "worker:2 is not in cluster 'w' (2 workers)");
}

TEST_CASE("a step budget makes the data repeat") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(R"(
    name: "w"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:3" }
    training { steps: 100 }
    data { source: SYNTHETIC }
    checkpoint { dir: "c" every_seconds: 30 }
    ps_unavailable_timeout_seconds: 20
  )",
                                                       "w.pbtxt");
  REQUIRE(c.ok());
  absl::StatusOr<WorkerTaskConfig> w = WorkerTaskFromConfig(*c, 0);
  REQUIRE(w.ok());
  CHECK(w->batches.epochs == 0);
  CHECK(w->loop.max_steps == 100);
  CHECK(w->data.name == "synthetic");
  CHECK(w->loop.ps_unavailable_timeout == absl::Seconds(20));
  CHECK(w->loop.checkpoint_every == absl::Seconds(30));
  CHECK(w->loop.final_checkpoint);
}

TEST_CASE("weight decay exemptions must name the model's variables") {
  const std::string config = R"(
    name: "w"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:3" }
    training { steps: 100 optimizer { kind: MOMENTUM momentum: 0.9
               nesterov: true weight_decay: 0.0005 no_weight_decay: "NAME" } }
    data { source: SYNTHETIC }
  )";
  std::string good = config;
  good.replace(good.find("NAME"), 4, "softmax_linear/biases");
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(good, "w.pbtxt");
  REQUIRE(c.ok());
  CHECK(WorkerTaskFromConfig(*c, 0).ok());
  std::string bad = config;
  bad.replace(bad.find("NAME"), 4, "fc9/weights");
  c = ParseClusterConfig(bad, "w.pbtxt");
  REQUIRE(c.ok());
  CHECK(WorkerTaskFromConfig(*c, 0).status().message() ==
        "training.optimizer.no_weight_decay: 'fc9/weights' is not a variable "
        "of model cifar10_tutorial");
}

TEST_CASE("the C++ worker refuses a model that comes from the worker program") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(R"(
    name: "x"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:2" }
    training { steps: 5 }
    model { name: "external" }
    data { source: SYNTHETIC }
  )",
                                                       "x.pbtxt");
  REQUIRE(c.ok());
  absl::StatusOr<WorkerTaskConfig> w = WorkerTaskFromConfig(*c, 0);
  CHECK(absl::IsInvalidArgument(w.status()));
  CHECK_THAT(std::string(w.status().message()),
             Catch::Contains("worker:0") && Catch::Contains("Python"));
}

TEST_CASE(
    "batch norm statistics: on the servers by default, LOCAL on "
    "request, refused for a model without batch norm") {
  const std::string base = R"(
    name: "bn"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:2" }
    training { steps: 5 }
    data { source: SYNTHETIC }
  )";
  auto parse = [&](const std::string& model) {
    absl::StatusOr<ClusterConfig> c =
        ParseClusterConfig(base + model, "bn.pbtxt");
    REQUIRE(c.ok());
    return WorkerTaskFromConfig(*c, 0);
  };
  auto has = [](const WorkerTaskConfig& w, const std::string& name) {
    for (const VariableSpec& v : w.client.variables) {
      if (v.name == name) return true;
    }
    return false;
  };
  absl::StatusOr<WorkerTaskConfig> server =
      parse(R"(model { name: "resnet20" })");
  REQUIRE(server.ok());
  CHECK(server->loop.statistics_on_servers);
  CHECK(has(*server, "bn1.running_mean"));
  CHECK(has(*server, "bn1.running_var"));
  absl::StatusOr<WorkerTaskConfig> local =
      parse(R"(model { name: "resnet20" batch_norm_statistics: LOCAL })");
  REQUIRE(local.ok());
  CHECK_FALSE(local->loop.statistics_on_servers);
  CHECK_FALSE(has(*local, "bn1.running_mean"));
  CHECK(has(*local, "bn1.weight"));
  for (const char* setting : {"SERVER", "LOCAL"}) {
    absl::StatusOr<WorkerTaskConfig> bad = parse(
        std::string(
            R"(model { name: "cifar10_tutorial" batch_norm_statistics: )") +
        setting + " }");
    CHECK(absl::IsInvalidArgument(bad.status()));
    CHECK(bad.status().message() ==
          std::string("model.batch_norm_statistics is set (") + setting +
              "), but model cifar10_tutorial has no batch norm");
  }
}

}  // namespace
}  // namespace psgd
