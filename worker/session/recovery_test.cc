// Recovery while no server answers: it waits (up to ps_unavailable_timeout)
// for servers that may come back, unless the job's end marker (the chief's
// run summary) appeared since the worker started: then the job ended, and
// the worker ends with CANCELLED at once.
#include "worker/session/recovery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "ps/testing/fault_injection_client.h"
#include "worker/session/session_test_cluster.h"

namespace psgd {
namespace {

// Worker 0 of a cluster it cannot reach: every call UNAVAILABLE.
struct CutOffWorker {
  CutOffWorker()
      : cluster({{"w", {4}, Initializer::Constant(0.5f)}}, ps::Mode::kSync, 1) {
    client = std::make_unique<ps::FaultInjectionPsClient>(
        cluster.clients[0].get(), &injector, 0);
    client->SetCut(ps::CutMode::kFail);
  }
  SessionTestCluster cluster;
  ps::FaultInjector injector{7};
  std::unique_ptr<ps::FaultInjectionPsClient> client;
};

std::string TempPath() {
  char path[] = "/tmp/recovery_test_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::remove(path);
  return path;
}

void Write(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("{}\n", f);
  std::fclose(f);
}

TEST_CASE("recovery: the chief's run summary ends the wait for the servers") {
  CutOffWorker w;
  const std::string marker = TempPath();
  // Without the marker it would wait 20 s and end UNAVAILABLE.
  Recovery recovery(w.client.get(), 0, absl::Seconds(20), marker);
  Write(marker);  // the job ended after this worker started
  absl::StatusOr<int64_t> r =
      recovery.Recover(absl::UnavailableError("push: the server is gone"));
  INFO(r.status().ToString());
  CHECK(absl::IsCancelled(r.status()));
  CHECK(r.status().message().find("the job ended") != absl::string_view::npos);
  std::remove(marker.c_str());
}

TEST_CASE("recovery: an older run's summary, or none, is waited out") {
  CutOffWorker w;
  const std::string marker = TempPath();
  Write(marker);
  // Written well before the worker started: another run's in this
  // directory (the modification time put back an hour).
  const absl::Time old = absl::Now() - absl::Hours(1);
  const timespec times[2] = {absl::ToTimespec(old), absl::ToTimespec(old)};
  REQUIRE(utimensat(AT_FDCWD, marker.c_str(), times, 0) == 0);
  for (const std::string& m : {marker, std::string()}) {
    Recovery recovery(w.client.get(), 0, absl::Milliseconds(300), m);
    absl::StatusOr<int64_t> r =
        recovery.Recover(absl::UnavailableError("push: the server is gone"));
    INFO(r.status().ToString());
    CHECK(absl::IsUnavailable(r.status()));
    CHECK(r.status().message().find("did not come back within") !=
          absl::string_view::npos);
  }
  std::remove(marker.c_str());
}

}  // namespace
}  // namespace psgd
