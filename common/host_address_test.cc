#include "common/host_address.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

namespace psgd {
namespace {

// A listening TCP socket on 127.0.0.1 (closed by the destructor).
struct Listener {
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(listen(fd, 1) == 0);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
  int fd = -1;
  int port = 0;
};

TEST_CASE("host names resolve or are named") {
  CHECK(ResolveHost("localhost").ok());
  CHECK(ResolveHost("127.0.0.1").ok());
  absl::Status s = ResolveHost("no-such-host.invalid");
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(s.message()),
             Catch::StartsWith("host 'no-such-host.invalid' does not resolve"));
}

TEST_CASE("brackets come off IPv6 hosts") {
  std::string host;
  int port = 0;
  REQUIRE(SplitHostPortUnbracketed("[::1]:80", &host, &port).ok());
  CHECK(host == "::1");
  CHECK(port == 80);
  REQUIRE(SplitHostPortUnbracketed("h0:2222", &host, &port).ok());
  CHECK(host == "h0");
}

TEST_CASE("a listen address in use or not of this host is named") {
  Listener l;
  const std::string taken = "127.0.0.1:" + std::to_string(l.port);
  absl::Status s = CheckCanListen(taken);
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(s.message()) ==
        "cannot listen on '" + taken +
            "': the address is in use (another process listens there)");
  // The wildcard includes the port in use on loopback.
  CHECK(CheckCanListen("0.0.0.0:" + std::to_string(l.port)).code() ==
        absl::StatusCode::kUnavailable);
  // 198.18.0.0/15 is for benchmarks: not an address of this host.
  CHECK_THAT(std::string(CheckCanListen("198.18.255.254:2222").message()),
             Catch::Contains("is not an address of this host"));
  CHECK(CheckCanListen("no-such-host.invalid:1").code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("the errors name the task and its field") {
  Listener l;
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
      "name: 'x' ps { address: 'localhost:" + std::to_string(l.port) +
          "' } ps { address: 'nowhere.invalid:2' listen_address: "
          "'127.0.0.1:" +
          std::to_string(l.port) +
          "' } worker { address: 'w:1' } training { steps: 1 } data { "
          "source: SYNTHETIC }",
      "c.pbtxt");
  REQUIRE(c.ok());
  absl::Status s = CheckPsAddressesResolve(*c);
  CHECK_THAT(std::string(s.message()),
             Catch::StartsWith("ps:1 (ps[1].address 'nowhere.invalid:2'): "
                               "host 'nowhere.invalid' does not resolve"));
  CHECK_THAT(std::string(CheckPsCanListen(*c, 0).message()),
             Catch::StartsWith("ps:0 (ps[0].address): cannot listen on"));
  CHECK_THAT(std::string(CheckPsCanListen(*c, 1).message()),
             Catch::StartsWith("ps:1 (ps[1].listen_address): cannot listen on "
                               "'127.0.0.1:"));
}

}  // namespace
}  // namespace psgd
