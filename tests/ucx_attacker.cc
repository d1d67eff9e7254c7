// The connection attacks of docs/RELIABILITY.md's "Security" table (60-6),
// and the member's checks between them, run against a real ps_server by
// tests/ucx_attacks_test.sh (as another uid where the test runs as root).
// Each subcommand prints one line of what it saw and exits 0 when it saw
// what the table promises (1 otherwise, 2 for bad flags).
//
//   ucx_attacker --host=H --port=P --count=N --seconds=S hold
//       N raw TCP connections to H:P (the UCX listener) that never send a
//       byte, held S seconds; prints "held K of N" once they are open (on
//       stdout, flushed) and exits 0 when K == N.
//   ucx_attacker --host=H --port=P --count=N --seconds=S slow
//       N clients of the Prometheus page at H:P, each sending "GET /metrics"
//       and then a header line a second, connecting again when dropped, for
//       S seconds; prints how often the server dropped one and the longest
//       it held one. Exits 0.
//   ucx_attacker --host=H --port=P --megabytes=M --seconds=S eager
//       speaks UCP to the UCX listener at H:P itself: one request with a
//       key nobody was given and M MB of data, sent eagerly (rendezvous
//       off) in 1 MB fragments, which UCX on the server assembles before
//       the messenger sees the key. It drives the send for 6 s, then
//       stops (neither sends nor closes) for S seconds: the server is left
//       holding a half-assembled message. Prints what it started. Exits 0.
//   ucx_attacker --address=A --cluster=C --token_file=F --deadline_s=D status
//       a Status call with the token; exits 0 when it is answered OK within
//       D seconds.
//   ucx_attacker --host=H --port=P --token_file=F --deadline_s=D scrape
//       GET /metrics with the token; exits 0 when "200 OK" comes within D
//       seconds.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_security.h"
#include "common/security.h"
#include "proto/ps.grpc.pb.h"

ABSL_FLAG(std::string, address, "", "status: the server's gRPC host:port.");
ABSL_FLAG(std::string, cluster, "", "status: the cluster's name.");
ABSL_FLAG(std::string, host, "127.0.0.1", "hold, slow, scrape: the host.");
ABSL_FLAG(int, port, 0, "hold, slow, scrape: the port.");
ABSL_FLAG(int, count, 1, "hold, slow: connections.");
ABSL_FLAG(int, seconds, 10, "hold, slow: how long.");
ABSL_FLAG(std::string, token_file, "", "status, scrape: the token.");
ABSL_FLAG(int, megabytes, 2048, "eager: the message's data.");
ABSL_FLAG(int, deadline_s, 10, "status, scrape: the deadline.");

namespace psgd {
namespace {

sockaddr_in Address() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(absl::GetFlag(FLAGS_port)));
  inet_pton(AF_INET, absl::GetFlag(FLAGS_host).c_str(), &a.sin_addr);
  return a;
}

// A connected socket, or -1 when the connection is not made within
// `timeout`.
int ConnectWithin(absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a = Address();
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (errno != EINPROGRESS) {
      close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t len = sizeof(error);
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) !=
            1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Hold() {
  RaiseFileLimit();
  const int count = absl::GetFlag(FLAGS_count);
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = ConnectWithin(absl::Seconds(2));
    if (fd >= 0) fds.push_back(fd);
  }
  std::printf("held %zu of %d\n", fds.size(), count);
  std::fflush(stdout);
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_seconds)));
  for (int fd : fds) close(fd);
  return static_cast<int>(fds.size()) == count ? 0 : 1;
}

int Slow() {
  RaiseFileLimit();
  struct Client {
    int fd = -1;
    absl::Time since;
  };
  std::vector<Client> clients(absl::GetFlag(FLAGS_count));
  const absl::Time end =
      absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  int64_t dropped = 0;
  absl::Duration longest = absl::ZeroDuration();
  const char kStart[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  const char kLine[] = "X-Slow: 1\r\n";
  while (absl::Now() < end) {
    for (Client& c : clients) {
      if (c.fd < 0) {
        c.fd = ConnectWithin(absl::Milliseconds(200));
        if (c.fd < 0) continue;
        c.since = absl::Now();
        send(c.fd, kStart, sizeof(kStart) - 1, MSG_NOSIGNAL);
      }
      // Dropped by the server: what it sent back (a 4xx), or EOF, or a
      // send that fails.
      char buffer[512];
      const ssize_t got = recv(c.fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      const bool closed =
          got >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
          send(c.fd, kLine, sizeof(kLine) - 1, MSG_NOSIGNAL) < 0;
      if (closed) {
        longest = std::max(longest, absl::Now() - c.since);
        dropped++;
        close(c.fd);
        c.fd = -1;
      }
    }
    absl::SleepFor(absl::Seconds(1));
  }
  for (Client& c : clients) {
    if (c.fd >= 0) {
      longest = std::max(longest, absl::Now() - c.since);
      close(c.fd);
    }
  }
  std::printf(
      "slow clients: %zu, dropped by the server %lld times, the "
      "longest held %.1f s\n",
      clients.size(), static_cast<long long>(dropped),
      absl::ToDoubleSeconds(longest));
  return 0;
}

int Eager() {
  // Every message eagerly, in 1 MB fragments (the server's receive segments
  // are 1 MB too): read by UCX from the environment.
  setenv("UCX_RNDV_THRESH", "inf", 1);
  setenv("UCX_TCP_TX_SEG_SIZE", "1M", 1);
  setenv("UCX_TCP_RX_SEG_SIZE", "1M", 1);
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return 1;
  ucp_config_modify(config, "TLS", "tcp");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM;
  ucp_context_h context = nullptr;
  const ucs_status_t inited = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (inited != UCS_OK) return 1;
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  if (ucp_worker_create(context, &worker_params, &worker) != UCS_OK) return 1;
  sockaddr_in addr = Address();
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_FLAGS |
                         UCP_EP_PARAM_FIELD_SOCK_ADDR |
                         UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep_params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  ep_params.sockaddr.addrlen = sizeof addr;
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ucp_ep_h ep = nullptr;
  if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) return 1;
  // The messenger's request head (ps/ucx/messenger.cc): magic "psgQ",
  // method, call, key (a stranger's: zeros), header size.
  std::string head(40, '\0');
  const uint32_t magic = 0x70736751, method = 1;
  const uint64_t call = 1;
  std::memcpy(&head[0], &magic, 4);
  std::memcpy(&head[4], &method, 4);
  std::memcpy(&head[8], &call, 8);
  // Untouched anonymous memory: the zero page, no memory of the
  // attacker's own.
  const size_t size = static_cast<size_t>(absl::GetFlag(FLAGS_megabytes)) << 20;
  void* data =
      mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) return 1;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t sent =
      ucp_am_send_nbx(ep, 1, head.data(), head.size(), data, size, &param);
  std::printf("eager: %d MB with a stranger's key, started\n",
              absl::GetFlag(FLAGS_megabytes));
  std::fflush(stdout);
  const absl::Time stop_at = absl::Now() + absl::Seconds(6);
  while (absl::Now() < stop_at) ucp_worker_progress(worker);
  // Neither sends nor closes: the server holds what has come.
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_seconds)));
  (void)sent;
  std::_Exit(0);  // no goodbye to the server
}

std::string Token() {
  const std::string file = absl::GetFlag(FLAGS_token_file);
  if (file.empty()) return "";
  absl::StatusOr<std::string> token = ReadTokenFile(file);
  if (!token.ok()) {
    std::fprintf(stderr, "%s\n", token.status().ToString().c_str());
    std::exit(2);
  }
  return *token;
}

int Status() {
  ClientCredentials credentials;
  credentials.token = Token();
  grpc::ChannelArguments args;
  auto channel = CreateChannel(absl::GetFlag(FLAGS_address), credentials, args);
  auto stub = ps::wire::ParameterServer::NewStub(channel);
  ps::wire::StatusRequest request;
  request.set_cluster(absl::GetFlag(FLAGS_cluster));
  ps::wire::StatusResponse response;
  grpc::ClientContext ctx;
  const absl::Time start = absl::Now();
  ctx.set_deadline(absl::ToChronoTime(
      start + absl::Seconds(absl::GetFlag(FLAGS_deadline_s))));
  const grpc::Status s = stub->Status(&ctx, request, &response);
  std::printf("Status with the token: code %d %s (%.2f s)\n", s.error_code(),
              s.error_message().c_str(),
              absl::ToDoubleSeconds(absl::Now() - start));
  return s.ok() ? 0 : 1;
}

int Scrape() {
  const std::string token = Token();
  const absl::Time start = absl::Now();
  const absl::Time deadline =
      start + absl::Seconds(absl::GetFlag(FLAGS_deadline_s));
  auto finish = [&](const std::string& what, bool ok) {
    std::printf("scrape with the token: %s (%.2f s)\n", what.c_str(),
                absl::ToDoubleSeconds(absl::Now() - start));
    return ok ? 0 : 1;
  };
  const int fd = ConnectWithin(deadline - absl::Now());
  if (fd < 0) return finish("no connection", false);
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: x\r\n"
      "Authorization: Bearer " +
      token + "\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return finish("the request could not be sent", false);
  }
  std::string response;
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) != 1) break;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const std::string first = response.substr(0, response.find('\r'));
  return finish(first.empty() ? "no answer" : first,
                response.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr,
                 "usage: ucx_attacker [flags] hold|slow|status|scrape\n");
    return 2;
  }
  const std::string what = args[1];
  if (what == "hold") return psgd::Hold();
  if (what == "slow") return psgd::Slow();
  if (what == "status") return psgd::Status();
  if (what == "scrape") return psgd::Scrape();
  if (what == "eager") return psgd::Eager();
  std::fprintf(stderr, "unknown command '%s'\n", what.c_str());
  return 2;
}
