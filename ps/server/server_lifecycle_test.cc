// ShardLifecycle over a bare shard, without gRPC or sockets: its own loop
// expires a silent worker's lease; Stop writes the last metrics line and
// the summary into the run directory.
#include "ps/server/server_lifecycle.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "common/file_io.h"
#include "common/testing/eventually.h"
#include "ps/testing/shard_test_util.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

LifecycleOptions Fast() {
  LifecycleOptions o;
  o.tick = absl::Milliseconds(5);
  o.metrics_every = absl::Milliseconds(5);
  return o;
}

// A serving layer under a token scanner: every time the lifecycle asks, more
// calls were refused.
class ScannedCounters final : public ServingCounters {
 public:
  std::string run_dir() const override { return ""; }
  int64_t payload_sent_bytes() const override { return 0; }
  int64_t payload_received_bytes() const override { return 0; }
  int64_t unauthenticated_calls() const override {
    asked_.fetch_add(1);
    return refused_.fetch_add(7) + 7;
  }
  int asked() const { return asked_.load(); }

 private:
  mutable std::atomic<int> asked_{0};
  mutable std::atomic<int64_t> refused_{0};
};

TEST_CASE("the lifecycle's own loop expires a silent worker's lease") {
  ShardOptions options;
  options.mode = Mode::kAsync;
  options.total_num_replicas = 2;
  options.worker_lease = absl::Milliseconds(50);
  auto shard = testing::MakeShard(options);
  REQUIRE(shard->Join(1).ok());
  REQUIRE(shard->Status().workers_expired == 0);

  auto lifecycle = ShardLifecycle::Start(shard.get(), nullptr, Fast());
  REQUIRE(lifecycle.ok());
  // Nobody sends anything: both workers' leases run out, and only the
  // lifecycle calls ExpireWorkers.
  CHECK(Eventually([&] {
    const ShardStatus s = shard->Status();
    return s.live_workers.empty() && s.workers_expired == 2;
  }));
  // An expired worker may join again.
  REQUIRE(shard->Join(1).ok());
  (*lifecycle)->Stop("test over");
  (*lifecycle)->Stop("twice");  // idempotent
}

TEST_CASE("without a lease the lifecycle expires nobody") {
  ShardOptions options;
  options.total_num_replicas = 2;
  auto shard = testing::MakeShard(options);
  ScannedCounters counters;  // counts the loop's rounds
  auto lifecycle = ShardLifecycle::Start(shard.get(), &counters, Fast());
  REQUIRE(lifecycle.ok());
  // Twenty rounds of the loop, each of which would expire a lease that ran
  // out (rather than a fixed sleep, which a slow machine may not fill).
  CHECK(Eventually([&] { return counters.asked() >= 20; }));
  (*lifecycle)->Stop("test over");
  CHECK(shard->Status().live_workers.size() == 2);
  CHECK(shard->Status().workers_expired == 0);
}

TEST_CASE("metrics lines and the summary go to the run directory") {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/lifecycle_run";
  ShardOptions options;
  options.shard_index = 1;
  options.num_shards = 2;
  auto shard = testing::MakeShard(options);
  LifecycleOptions lo = Fast();
  lo.run_dir = dir;
  auto lifecycle = ShardLifecycle::Start(shard.get(), nullptr, lo);
  REQUIRE(lifecycle.ok());
  (*lifecycle)->Stop("test over");
  absl::StatusOr<std::string> lines = ReadFileToString(dir + "/ps-1.jsonl");
  REQUIRE(lines.ok());
  CHECK(lines->find("\"server\"") != std::string::npos);
  CHECK(lines->find("\"ps:1\"") != std::string::npos);
  absl::StatusOr<std::string> summary =
      ReadFileToString(dir + "/ps-1.summary.json");
  REQUIRE(summary.ok());
  CHECK(summary->find("\"server_summary\"") != std::string::npos);
  CHECK(summary->find("\"test over\"") != std::string::npos);
}

TEST_CASE("refused calls are logged at most every 10 s, however many come") {
  // The log lines, from the default logger.
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  ShardOptions options;
  auto shard = testing::MakeShard(options);
  ScannedCounters counters;
  auto lifecycle = ShardLifecycle::Start(shard.get(), &counters, Fast());
  REQUIRE(lifecycle.ok());
  // Twenty rounds of the loop, each with more refusals than the last (no
  // timing is asserted: the rounds only have to happen).
  CHECK(Eventually([&] { return counters.asked() >= 20; }));
  (*lifecycle)->Stop("test over");
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  // The periodic line (Stop's final line counts them too, once).
  const std::string periodic = "without the cluster's token (";
  size_t lines = 0;
  for (size_t at = text.find(periodic); at != std::string::npos;
       at = text.find(periodic, at + 1)) {
    ++lines;
  }
  CHECK(lines == 1);
  CHECK(text.find("refused 7 call(s) without the cluster's token (7 so far)") !=
        std::string::npos);
}

TEST_CASE("bad lifecycle options are refused naming the field") {
  ShardOptions options;
  auto shard = testing::MakeShard(options);
  LifecycleOptions o;
  o.slow_step = absl::Seconds(-1);
  absl::StatusOr<std::unique_ptr<ShardLifecycle>> l =
      ShardLifecycle::Start(shard.get(), nullptr, o);
  CHECK(l.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(l.status().message() ==
        "lifecycle option slow_step=-1s: must be finite and >= 0 (0: never)");
  o = LifecycleOptions{};
  o.tick = absl::ZeroDuration();
  CHECK(ValidateLifecycleOptions(o).message() ==
        "lifecycle option tick=0: must be positive and finite");
  CHECK(ValidateLifecycleOptions(LifecycleOptions{}).ok());
}

}  // namespace
}  // namespace ps
}  // namespace psgd
