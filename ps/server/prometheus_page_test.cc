#include "ps/server/prometheus_page.h"

#include <catch2/catch.hpp>
#include <string>

namespace psgd {
namespace ps {
namespace {

TEST_CASE("a shard's page: pushes by outcome and the staleness histogram") {
  ShardStatus s;
  s.shard_index = 1;
  s.step = 12;
  s.counters.applied = 12;
  s.counters.refused = 3;
  s.counters.refused_too_stale = 1;
  s.live_workers = {0, 2};
  s.staleness_histogram = {{0, 4}, {1, 5}, {3, 3}};
  const std::string t = ShardMetricsText(s, 4096, 1024);
  INFO(t);
  CHECK(t.find("psgd_ps_pushes_total{shard=\"1\",outcome=\"applied\"} 12\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_pushes_total{shard=\"1\",outcome=\"refused\"} 2\n") !=
        std::string::npos);
  CHECK(
      t.find("psgd_ps_pushes_total{shard=\"1\",outcome=\"refused_too_stale\"} "
             "1\n") != std::string::npos);
  CHECK(t.find("psgd_ps_live_workers{shard=\"1\"} 2\n") != std::string::npos);
  CHECK(t.find("psgd_ps_sent_bytes_total{shard=\"1\"} 4096\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_received_bytes_total{shard=\"1\"} 1024\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_staleness_bucket{shard=\"1\",le=\"0\"} 4\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_staleness_bucket{shard=\"1\",le=\"2\"} 9\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_staleness_bucket{shard=\"1\",le=\"4\"} 12\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_staleness_sum{shard=\"1\"} 14\n") != std::string::npos);
  CHECK(t.find("psgd_ps_staleness_count{shard=\"1\"} 12\n") !=
        std::string::npos);
}

TEST_CASE("a shard's page: the async staleness controls") {
  ShardStatus s;
  s.ssp_blocked_pulls = 7;
  s.ssp_blocked_seconds = 1.5;
  s.dc_compensated = 20;
  s.dc_uncompensated = 2;
  const std::string t = ShardMetricsText(s, 0, 0);
  INFO(t);
  CHECK(t.find("psgd_ps_ssp_blocked_pulls_total{shard=\"0\"} 7\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_ssp_blocked_seconds_total{shard=\"0\"} 1.5\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_dc_asgd_pushes_total{shard=\"0\",compensated="
               "\"true\"} 20\n") != std::string::npos);
  CHECK(t.find("psgd_ps_dc_asgd_pushes_total{shard=\"0\",compensated="
               "\"false\"} 2\n") != std::string::npos);
}

TEST_CASE("a shard's page: the data queue, only where there is one") {
  ShardStatus s;
  CHECK(ShardMetricsText(s, 0, 0).find("psgd_ps_data") == std::string::npos);
  s.data_queue = true;
  s.data_epoch = 2;
  s.data_chunks_done = 5;
  s.data_chunks_per_epoch = 20;
  s.data_counters.leased = 50;
  s.data_counters.done = 45;
  s.data_counters.returned = 3;
  const std::string t = ShardMetricsText(s, 0, 0);
  INFO(t);
  CHECK(t.find("psgd_ps_data_chunks_total{shard=\"0\",what=\"leased\"} 50\n") !=
        std::string::npos);
  CHECK(t.find("psgd_ps_data_chunks_total{shard=\"0\",what=\"done\"} 45\n") !=
        std::string::npos);
  CHECK(
      t.find("psgd_ps_data_chunks_total{shard=\"0\",what=\"returned\"} 3\n") !=
      std::string::npos);
  CHECK(t.find("psgd_ps_data_epoch{shard=\"0\"} 2\n") != std::string::npos);
  CHECK(t.find("psgd_ps_data_epoch_done_fraction{shard=\"0\"} 0.25\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
