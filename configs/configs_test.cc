// Every config shipped in configs/ loads and validates.
#include <string>

#include <catch2/catch.hpp>

#include "common/cluster_config.h"

namespace psgd {
namespace {

TEST_CASE("shipped configs load") {
  struct Expect {
    const char* file;
    int ps, workers, n;
    config::TrainingConfig::Mode mode;
  } expected[] = {
      {"local_1worker.pbtxt", 1, 1, 1, config::TrainingConfig::SYNC},
      {"sync_2ps_4workers.pbtxt", 2, 4, 4, config::TrainingConfig::SYNC},
      {"async_2ps_4workers.pbtxt", 2, 4, 4, config::TrainingConfig::ASYNC},
      {"sync_backup_3of4.pbtxt", 2, 4, 3, config::TrainingConfig::SYNC},
  };
  for (const Expect& e : expected) {
    INFO(e.file);
    absl::StatusOr<ClusterConfig> c =
        LoadClusterConfig(std::string("configs/") + e.file);
    REQUIRE(c.ok());
    CHECK(c->ps_size() == e.ps);
    CHECK(c->worker_size() == e.workers);
    CHECK(c->training().replicas_to_aggregate() == e.n);
    CHECK(c->training().total_num_replicas() == e.workers);
    CHECK(c->training().mode() == e.mode);
  }
}

}  // namespace
}  // namespace psgd
