#include "ps/server/server_config.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>

namespace psgd {
namespace ps {
namespace {

TEST_CASE("a ps task's options come from the config") {
  absl::StatusOr<ClusterConfig> sync =
      LoadClusterConfig("configs/sync_backup_3of4.pbtxt");
  REQUIRE(sync.ok());
  absl::StatusOr<ServerOptions> o = ServerOptionsFromConfig(*sync, 1);
  REQUIRE(o.ok());
  CHECK(o->listen_address == "127.0.0.1:23131");
  CHECK(o->ps_addresses.size() == 2);
  CHECK(o->shard.shard_index == 1);
  CHECK(o->shard.num_shards == 2);
  CHECK(o->shard.cluster_name == "sync-backup-3of4");
  CHECK(o->shard.mode == Mode::kSync);
  CHECK(o->shard.replicas_to_aggregate == 3);
  CHECK(o->shard.total_num_replicas == 4);
  CHECK(o->shard.staleness_bound == -1);
  CHECK(o->shard.optimizer.kind == OptimizerOptions::Kind::kAdam);
  CHECK(o->shard.optimizer.learning_rate == Approx(0.001));
  CHECK(o->shard.worker_lease == absl::Seconds(30));
  CHECK(o->shard.checkpoint.dir.empty());  // no checkpoint section
  // No security block: the cluster's default token (made in this test's
  // HOME), never none.
  CHECK(o->security.token.size() == 64);
  CHECK_FALSE(o->security.insecure);
  CHECK_FALSE(o->security.tls);
  CHECK(o->wire.gradients == DType::kFloat32);  // no wire block
  CHECK(o->wire.weights == DType::kFloat32);

  CHECK(ServerOptionsFromConfig(*sync, 2).status().message() ==
        "ps:2 is not in cluster 'sync-backup-3of4' (2 ps tasks)");
}

TEST_CASE("the wire block sets the dtypes on the wire") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(R"(
    name: "a"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:2" }
    training { steps: 10 }
    data { source: SYNTHETIC }
    wire { gradients: FP16 weights: BF16 }
  )",
                                                       "a.pbtxt");
  REQUIRE(c.ok());
  absl::StatusOr<ServerOptions> o = ServerOptionsFromConfig(*c, 0);
  REQUIRE(o.ok());
  CHECK(o->wire.gradients == DType::kFloat16);
  CHECK(o->wire.weights == DType::kBFloat16);
  CHECK_FALSE(ParseClusterConfig(R"(
    name: "a"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:2" }
    training { steps: 10 }
    wire { gradients: INT8 }
  )",
                                 "a.pbtxt")
                  .ok());
}

// ps:0's shard options from a config's text.
ShardOptions Ps0Options(const std::string& config) {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(config, "a.pbtxt");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  absl::StatusOr<ServerOptions> o = ServerOptionsFromConfig(*c, 0);
  REQUIRE(o.ok());
  return o->shard;
}

TEST_CASE("N following the live workers, and the linear rule with it") {
  auto options = [](const std::string& training) {
    return Ps0Options(
        "name: \"a\" ps { address: \"127.0.0.1:1\" } worker { address: "
        "\"127.0.0.1:2\" } worker { address: \"127.0.0.1:3\" } "
        "max_workers: 4 training { steps: 10 batch_size: 8 " +
        training + " } data { source: SYNTHETIC sharding: SERVERS }");
  };
  ShardOptions fixed =
      options("optimizer { schedule { base_batch_size: 16 } }");
  CHECK_FALSE(fixed.n_follows_live);
  CHECK_FALSE(fixed.lr_scale_follows_n);
  CHECK(fixed.optimizer.schedule.scale == 1.0);  // 8 x 2 / 16
  ShardOptions live = options("replicas_rule: LIVE_MINUS_BACKUPS");
  CHECK(live.n_follows_live);
  CHECK_FALSE(live.lr_scale_follows_n);  // no linear rule: a fixed rate
  ShardOptions both = options(
      "replicas_rule: LIVE_MINUS_BACKUPS optimizer { schedule { "
      "base_batch_size: 16 } }");
  CHECK(both.n_follows_live);
  CHECK(both.lr_scale_follows_n);
  CHECK(both.optimizer.schedule.scale == 1.0);
}

TEST_CASE("adaptive backups: each field of the config reaches the server") {
  auto options = [](const std::string& training) {
    return Ps0Options(
        "name: \"a\" ps { address: \"127.0.0.1:1\" } worker { address: "
        "\"127.0.0.1:2\" } worker { address: \"127.0.0.1:3\" } worker { "
        "address: \"127.0.0.1:4\" } worker { address: \"127.0.0.1:5\" } "
        "training { steps: 10 batch_size: 8 replicas_to_aggregate: 3 "
        "total_num_replicas: 4 " +
        training + " } data { source: SYNTHETIC }");
  };
  ShardOptions off = options("");
  CHECK_FALSE(off.adaptive_backups);
  // Every field different, so that a swap of two shows.
  ShardOptions set = options(
      "adaptive_backups { min_replicas: 2 max_replicas: 3 window_steps: 7 "
      "warmup_steps: 11 }");
  CHECK(set.adaptive_backups);
  CHECK(set.adaptive.n_min == 2);
  CHECK(set.adaptive.n_max == 3);
  CHECK(set.adaptive.window == 7);
  CHECK(set.adaptive.warmup == 11);
  // Defaults: max_replicas is total_num_replicas; window 20, warmup 5.
  ShardOptions defaults = options("adaptive_backups { }");
  CHECK(defaults.adaptive_backups);
  CHECK(defaults.adaptive.n_min == 1);
  CHECK(defaults.adaptive.n_max == 4);
  CHECK(defaults.adaptive.window == 20);
  CHECK(defaults.adaptive.warmup == 5);
}

// The shard options of a one-ps, one-worker async cluster whose training
// block also holds `training`.
ShardOptions AsyncShardOptions(const std::string& training) {
  return Ps0Options(
      "name: \"a\" ps { address: \"127.0.0.1:1\" } worker { address: "
      "\"127.0.0.1:2\" } training { mode: ASYNC " +
      training + " steps: 10 } data { source: SYNTHETIC }");
}

TEST_CASE("async: the staleness bound: unset is none, 0 is a bound") {
  CHECK(AsyncShardOptions("").staleness_bound == -1);
  CHECK(AsyncShardOptions("staleness_bound: 0").staleness_bound == 0);
}

TEST_CASE("async staleness controls: unset is off, each reaches the server") {
  ShardOptions o = AsyncShardOptions("");
  CHECK(o.max_push_staleness == -1);
  CHECK(o.dc_asgd_lambda == 0);
  CHECK(o.async_beta1 == -1);
  CHECK(ShardOptimizerOptions(o).beta1 == o.optimizer.beta1);
  o = AsyncShardOptions(
      "staleness_bound: 1 max_push_staleness: 0 dc_asgd_lambda: 0.25 "
      "async_beta1: 0.5");
  CHECK(o.staleness_bound == 1);
  CHECK(o.max_push_staleness == 0);
  CHECK(o.dc_asgd_lambda == 0.25);
  CHECK(o.async_beta1 == 0.5);
  CHECK(ShardOptimizerOptions(o).beta1 == 0.5);
}

TEST_CASE("async: no aggregation, a staleness bound, lr scaling") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(R"(
    name: "a"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:2" }
    worker { address: "127.0.0.1:3" }
    training { mode: ASYNC staleness_bound: 3 lr_scaled_by_staleness: true
               optimizer { kind: SGD learning_rate: 0.1 } steps: 10 }
    data { source: SYNTHETIC }
    checkpoint { dir: "ckpt/a" every_steps: 50 every_seconds: 60 keep: 2 }
  )",
                                                       "a.pbtxt");
  REQUIRE(c.ok());
  absl::StatusOr<ServerOptions> o = ServerOptionsFromConfig(*c, 0);
  REQUIRE(o.ok());
  CHECK(o->shard.mode == Mode::kAsync);
  CHECK(o->shard.replicas_to_aggregate == 1);
  CHECK(o->shard.total_num_replicas == 2);
  CHECK(o->shard.staleness_bound == 3);
  CHECK(o->shard.scale_lr_by_staleness);
  CHECK(o->shard.optimizer.kind == OptimizerOptions::Kind::kSgd);
  CHECK(o->shard.checkpoint.dir == "ckpt/a");
  CHECK(o->shard.checkpoint.every_steps == 50);
  CHECK(o->shard.checkpoint.keep == 2);
}

TEST_CASE("the security block reaches the server's options") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(R"(
    name: "s"
    ps { address: "127.0.0.1:1" }
    worker { address: "127.0.0.1:2" }
    training { steps: 10 }
    data { source: SYNTHETIC }
    security { token: "s3cret" }
  )",
                                                       "s.pbtxt");
  REQUIRE(c.ok());
  absl::StatusOr<ServerOptions> o = ServerOptionsFromConfig(*c, 0);
  REQUIRE(o.ok());
  CHECK(o->security.token == "s3cret");
  CHECK_FALSE(o->security.tls);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
