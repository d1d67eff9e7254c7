#include "common/prometheus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace psgd {
namespace {

// A connection that sends nothing, as a slow client holds one.
int Idle(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// The response, or what came of it within `timeout_s` (0: no limit) for
// each read and write.
std::string Get(int port, const std::string& path,
                const std::string& authorization = "", int timeout_s = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  if (timeout_s > 0) {
    timeval tv{timeout_s, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: x\r\n" +
      (authorization.empty() ? ""
                             : "Authorization: " + authorization + "\r\n") +
      "\r\n";
  REQUIRE(write(fd, request.data(), request.size()) ==
          static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

MetricsPage Sample() {
  MetricsPage page;
  page.Counter("psgd_pushes_total", "Pushes by outcome.", 7,
               {{"outcome", "applied"}});
  page.Counter("psgd_pushes_total", "Pushes by outcome.", 2,
               {{"outcome", "dropped_surplus"}});
  page.Gauge("psgd_step", "The shard's step.", 42);
  HistogramData h({0.5, 1, 2});
  h.Observe(0.25);
  h.Observe(1.5);
  h.Observe(9);
  page.Histogram("psgd_step_seconds", "Step time.", h.upper_bounds, h.counts,
                 h.sum, h.count, {{"phase", "compute"}});
  return page;
}

TEST_CASE("the text format: families once, labels, histogram buckets") {
  CHECK(Sample().Text() ==
        "# HELP psgd_pushes_total Pushes by outcome.\n"
        "# TYPE psgd_pushes_total counter\n"
        "psgd_pushes_total{outcome=\"applied\"} 7\n"
        "psgd_pushes_total{outcome=\"dropped_surplus\"} 2\n"
        "# HELP psgd_step The shard's step.\n"
        "# TYPE psgd_step gauge\n"
        "psgd_step 42\n"
        "# HELP psgd_step_seconds Step time.\n"
        "# TYPE psgd_step_seconds histogram\n"
        "psgd_step_seconds_bucket{phase=\"compute\",le=\"0.5\"} 1\n"
        "psgd_step_seconds_bucket{phase=\"compute\",le=\"1\"} 1\n"
        "psgd_step_seconds_bucket{phase=\"compute\",le=\"2\"} 2\n"
        "psgd_step_seconds_bucket{phase=\"compute\",le=\"+Inf\"} 3\n"
        "psgd_step_seconds_sum{phase=\"compute\"} 10.75\n"
        "psgd_step_seconds_count{phase=\"compute\"} 3\n");
}

TEST_CASE("GET /metrics serves the page; other paths are 404") {
  int renders = 0;
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, [&] {
    ++renders;
    return Sample().Text();
  });
  REQUIRE(server.ok());
  const std::string ok = Get((*server)->port(), "/metrics");
  CHECK(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(ok.find("Content-Type: text/plain; version=0.0.4") !=
        std::string::npos);
  CHECK(ok.find("psgd_step 42\n") != std::string::npos);
  CHECK(Get((*server)->port(), "/").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(renders == 1);

  // With a token: only a request that carries it.
  auto guarded = MetricsHttpServer::Start(
      "127.0.0.1", 0, [] { return Sample().Text(); }, "scrape-token");
  REQUIRE(guarded.ok());
  CHECK(Get((*guarded)->port(), "/metrics").rfind("HTTP/1.1 401", 0) == 0);
  CHECK(Get((*guarded)->port(), "/metrics", "Bearer other")
            .rfind("HTTP/1.1 401", 0) == 0);
  const std::string authorized =
      Get((*guarded)->port(), "/metrics", "Bearer scrape-token");
  CHECK(authorized.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(authorized.find("psgd_step 42\n") != std::string::npos);

  // A port in use is a clear error naming it.
  auto again = MetricsHttpServer::Start("127.0.0.1", (*server)->port(),
                                        [] { return std::string(); });
  CHECK(again.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(again.status().message()) ==
        "metrics port 127.0.0.1:" + std::to_string((*server)->port()) +
            ": already in use");
}

TEST_CASE("a slow client holds neither the page nor the shutdown") {
  auto server =
      MetricsHttpServer::Start("127.0.0.1", 0, [] { return Sample().Text(); });
  REQUIRE(server.ok());
  // One idle connection per serving thread but one: the page still comes.
  std::vector<int> idle;
  for (int i = 0; i + 1 < MetricsHttpServer::kThreads; ++i) {
    idle.push_back(Idle((*server)->port()));
  }
  CHECK(Get((*server)->port(), "/metrics").rfind("HTTP/1.1 200 OK", 0) == 0);
  // Every thread held: the server still stops (the read times out; without
  // the timeout this test would never end).
  for (int i = 0; i < MetricsHttpServer::kThreads; ++i) {
    idle.push_back(Idle((*server)->port()));
  }
  server->reset();
  for (int fd : idle) close(fd);
}

// The slow clients of docs/RELIABILITY.md, Security 60-6: 40 connections
// each sending a header line a second (and connecting again when dropped)
// kept a scrape with the token from its answer for 12 s. The scrape must
// come within a generous deadline while they go on.
TEST_CASE("40 slow clients do not keep a scrape from its answer") {
  auto server = MetricsHttpServer::Start(
      "127.0.0.1", 0, [] { return Sample().Text(); }, "scrape-token");
  REQUIRE(server.ok());
  const int port = (*server)->port();
  std::atomic<bool> stop{false};
  std::thread slow([&] {
    std::vector<int> fds(40, -1);
    while (!stop) {
      for (int& fd : fds) {
        if (fd < 0) {
          fd = Idle(port);
          const char kStart[] = "GET /metrics HTTP/1.1\r\n";
          send(fd, kStart, sizeof(kStart) - 1, MSG_NOSIGNAL);
        }
        const char kLine[] = "X-Slow: 1\r\n";
        if (send(fd, kLine, sizeof(kLine) - 1, MSG_NOSIGNAL) < 0) {
          close(fd);  // dropped: again
          fd = -1;
        }
      }
      for (int i = 0; i < 10 && !stop; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  // Three scrapes while the slow clients hold on, each within 5 s.
  for (int i = 0; i < 3; ++i) {
    const std::string page = Get(port, "/metrics", "Bearer scrape-token",
                                 /*timeout_s=*/5);
    CHECK(page.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  }
  stop = true;
  slow.join();
}

TEST_CASE("promtool accepts the page") {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/metrics.txt";
  std::ofstream(path) << Sample().Text();
  // Debian's prometheus package (scripts/setup.sh installs it).
  const int rc = std::system(("promtool check metrics < " + path).c_str());
  CHECK(rc == 0);
}

}  // namespace
}  // namespace psgd
