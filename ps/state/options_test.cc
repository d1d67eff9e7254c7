#include "ps/state/options.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace psgd {
namespace ps {
namespace {

bool Names(const absl::Status& s, absl::string_view text) {
  return s.code() == absl::StatusCode::kInvalidArgument &&
         s.message().find(text) != absl::string_view::npos;
}

TEST_CASE("default options are valid") {
  CHECK(ValidateShardOptions(ShardOptions{}).ok());
  ShardOptions o;
  o.mode = Mode::kAsync;
  o.staleness_bound = 3;
  o.scale_lr_by_staleness = true;
  o.total_num_replicas = 8;
  CHECK(ValidateShardOptions(o).ok());
  o.staleness_bound = 0;
  o.max_push_staleness = 0;
  o.dc_asgd_lambda = 0.04;
  o.async_beta1 = 0;
  CHECK(ValidateShardOptions(o).ok());
}

TEST_CASE("async_beta1 replaces beta1 in the shard's optimizer") {
  ShardOptions o;
  o.mode = Mode::kAsync;
  CHECK(ShardOptimizerOptions(o).beta1 == o.optimizer.beta1);
  o.async_beta1 = 0.5;
  const OptimizerOptions opt = ShardOptimizerOptions(o);
  CHECK(opt.beta1 == 0.5);
  CHECK(opt.beta2 == o.optimizer.beta2);
  CHECK(opt.learning_rate == o.optimizer.learning_rate);
}

TEST_CASE("each bad option is refused naming the field and value") {
  auto with = [](auto change) {
    ShardOptions o;
    change(o);
    return ValidateShardOptions(o);
  };
  CHECK(Names(with([](ShardOptions& o) { o.num_shards = 0; }), "num_shards=0"));
  CHECK(
      Names(with([](ShardOptions& o) { o.shard_index = 2; }), "shard_index=2"));
  CHECK(Names(with([](ShardOptions& o) { o.cluster_name = "a b"; }),
              "cluster_name=a b"));
  CHECK(Names(with([](ShardOptions& o) { o.replicas_to_aggregate = 0; }),
              "replicas_to_aggregate=0"));
  CHECK(Names(with([](ShardOptions& o) {
                o.replicas_to_aggregate = 3;
                o.total_num_replicas = 2;
              }),
              "total_num_replicas=2"));
  CHECK(Names(with([](ShardOptions& o) {
                o.mode = Mode::kAsync;
                o.replicas_to_aggregate = 2;
                o.total_num_replicas = 2;
              }),
              "replicas_to_aggregate=2"));
  CHECK(Names(with([](ShardOptions& o) { o.staleness_bound = 2; }),
              "staleness_bound=2"));
  CHECK(Names(with([](ShardOptions& o) {
                o.mode = Mode::kAsync;
                o.staleness_bound = -2;
              }),
              "staleness_bound=-2"));
  CHECK(Names(with([](ShardOptions& o) { o.scale_lr_by_staleness = true; }),
              "scale_lr_by_staleness"));
  CHECK(Names(with([](ShardOptions& o) { o.max_push_staleness = 1; }),
              "max_push_staleness=1"));
  CHECK(Names(with([](ShardOptions& o) {
                o.mode = Mode::kAsync;
                o.max_push_staleness = -3;
              }),
              "max_push_staleness=-3"));
  CHECK(Names(with([](ShardOptions& o) { o.dc_asgd_lambda = 0.5; }),
              "dc_asgd_lambda=0.5: applies to async mode only"));
  for (double bad : {-0.5, std::nan(""), HUGE_VAL}) {
    CHECK(Names(with([bad](ShardOptions& o) {
                  o.mode = Mode::kAsync;
                  o.dc_asgd_lambda = bad;
                }),
                "dc_asgd_lambda="));
  }
  CHECK(Names(with([](ShardOptions& o) { o.async_beta1 = 0.5; }),
              "async_beta1=0.5: applies to async mode only"));
  for (double bad : {1.0, -0.5, std::nan("")}) {
    CHECK(Names(with([bad](ShardOptions& o) {
                  o.mode = Mode::kAsync;
                  o.async_beta1 = bad;
                }),
                "async_beta1="));
  }
  CHECK(Names(with([](ShardOptions& o) {
                o.mode = Mode::kAsync;
                o.optimizer.kind = OptimizerOptions::Kind::kSgd;
                o.async_beta1 = 0.5;
              }),
              "async_beta1=0.5: applies to Adam only"));
  CHECK(Names(with([](ShardOptions& o) { o.optimizer.learning_rate = 0; }),
              "learning_rate=0"));
  CHECK(Names(with([](ShardOptions& o) { o.optimizer.beta2 = 1; }), "beta2=1"));
  CHECK(Names(with([](ShardOptions& o) { o.optimizer.epsilon = -1; }),
              "epsilon=-1"));
  CHECK(Names(with([](ShardOptions& o) { o.max_message_bytes = 1000; }),
              "max_message_bytes=1000"));
  CHECK(Names(with([](ShardOptions& o) { o.split_threshold_bytes = 10; }),
              "split_threshold_bytes=10"));
  CHECK(Names(with([](ShardOptions& o) { o.bulk_threads = -1; }),
              "bulk_threads=-1"));
  CHECK(Names(with([](ShardOptions& o) { o.bulk_threads = 257; }),
              "bulk_threads=257"));
  CHECK(with([](ShardOptions& o) { o.bulk_threads = 256; }).ok());
}

TEST_CASE("mode and optimizer names parse") {
  CHECK(*ParseMode("async") == Mode::kAsync);
  CHECK(ModeName(*ParseMode("sync")) == "sync");
  CHECK(Names(ParseMode("semi").status(), "mode=semi"));
  CHECK(*ParseOptimizerKind("sgd") == OptimizerOptions::Kind::kSgd);
  CHECK(OptimizerKindName(OptimizerOptions::Kind::kAdam) == "adam");
  CHECK(Names(ParseOptimizerKind("rmsprop").status(), "optimizer=rmsprop"));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
