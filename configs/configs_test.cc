// Every config shipped in configs/ loads and validates, and listens on
// loopback only.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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

// Every file of configs/ (the runfiles hold them all).
std::vector<std::string> ShippedConfigs() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator("configs")) {
    if (entry.path().extension() == ".pbtxt") {
      out.push_back(entry.path().string());
    }
  }
  return out;
}

bool Loopback(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port).ok()) return false;
  return absl::StartsWith(host, "127.") || host == "localhost" ||
         host == "[::1]";
}

TEST_CASE("shipped configs listen on loopback only") {
  const std::vector<std::string> files = ShippedConfigs();
  CHECK(files.size() >= 4);
  for (const std::string& file : files) {
    INFO(file);
    absl::StatusOr<ClusterConfig> c = LoadClusterConfig(file);
    REQUIRE(c.ok());
    for (const config::PsTask& ps : c->ps()) {
      INFO(ps.address());
      CHECK(Loopback(ps.address()));
    }
    for (const config::WorkerTask& w : c->worker()) {
      INFO(w.address());
      CHECK(Loopback(w.address()));
    }
  }
  CHECK_FALSE(Loopback("0.0.0.0:1"));
  CHECK_FALSE(Loopback("10.0.0.1:1"));
  CHECK_FALSE(Loopback("[::]:1"));
  CHECK_FALSE(Loopback("127.0.0.1"));
}

}  // namespace
}  // namespace psgd
