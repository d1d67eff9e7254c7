#include "worker/session/worker_metrics.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

namespace psgd {
namespace {

TEST_CASE("a worker's page counts steps by outcome and times phases") {
  WorkerMetrics m(2);
  StepRecord r;
  r.global_step = 5;
  r.compute_s = 0.2;
  r.push_s = 0.004;
  r.loss = 1.5;
  r.outcome = StepOutcome::kApplied;
  m.Record(r, 1000, 2000);
  r.outcome = StepOutcome::kDroppedSurplus;
  r.global_step = 6;
  m.Record(r, 1000, 2000);
  const std::string t = m.Text();
  INFO(t);
  CHECK(
      t.find("psgd_worker_steps_total{worker=\"2\",outcome=\"applied\"} 1\n") !=
      std::string::npos);
  CHECK(t.find(
            "psgd_worker_steps_total{worker=\"2\",outcome=\"dropped_surplus\"} "
            "1\n") != std::string::npos);
  CHECK(t.find("psgd_worker_steps_total{worker=\"2\",outcome=\"rolled_back\"} "
               "0\n") != std::string::npos);
  CHECK(
      t.find("psgd_worker_phase_seconds_bucket{worker=\"2\",phase=\"compute\","
             "le=\"0.25\"} 2\n") != std::string::npos);
  CHECK(
      t.find("psgd_worker_phase_seconds_bucket{worker=\"2\",phase=\"compute\","
             "le=\"0.1\"} 0\n") != std::string::npos);
  CHECK(t.find("psgd_worker_sent_bytes_total{worker=\"2\"} 2000\n") !=
        std::string::npos);
  CHECK(t.find("psgd_worker_global_step{worker=\"2\"} 6\n") !=
        std::string::npos);

  // promtool (Debian's prometheus package) accepts it.
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/worker_metrics.txt";
  std::ofstream(path) << t;
  CHECK(std::system(("promtool check metrics < " + path).c_str()) == 0);
}

}  // namespace
}  // namespace psgd
