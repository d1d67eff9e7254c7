// ucx_echo_bench: the data plane's yardstick between two hosts. A server
// process echoes bytes over plain TCP sockets and over the UCX messenger
// (ps/ucx/messenger.h); a client process, on another host (a network
// namespace here, scripts/bench/ucx_echo.sh), runs worker threads that
// each echo a shard's bytes to every shard per step, alternating TCP and
// UCX rounds, and prints what each moved and the CPU it cost (client and
// server together).
//
//   ucx_echo_bench --role=server --tcp_port=7100 --ucx_port=7200 --shards=2
//   ucx_echo_bench --role=client --host=ux0 --tcp_port=7100 --ucx_port=7200
//       --shards=2 --workers=4 --bytes=2136596 --seconds=10 --rounds=5
//
// The server listens on tcp_port + i and ucx_port + i for shard i (each
// shard's UCX listener a messenger of its own, as each ps_server process
// would have) and on tcp_port + shards for the client's questions about its
// CPU time; it prints "ready" once listening and serves until killed.
// TCP: per worker and shard a connection and a thread (ps_bench's TCP
// echo). UCX: per worker a messenger (as a worker process has one) that
// starts a call on every shard and waits for all of them. A worker step is
// one echo of --bytes with every shard.
//
// It prints, per transport, worker steps/s, GB/s (both directions'
// payload) and CPU milliseconds per worker step, and
//   ucx_vs_tcp=<UCX steps/s / TCP steps/s>
//   ucx_cpu_vs_tcp=<UCX CPU per step / TCP CPU per step>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "ps/ucx/messenger.h"
#include "worker/bench/cpu_info.h"

ABSL_FLAG(std::string, role, "", "server or client.");
ABSL_FLAG(std::string, host, "127.0.0.1", "client: the server's host.");
ABSL_FLAG(std::string, listen, "0.0.0.0", "server: the address to listen on.");
ABSL_FLAG(int, tcp_port, 7100, "First TCP port (one per shard, then control).");
ABSL_FLAG(int, ucx_port, 7200, "First UCX port (one per shard).");
ABSL_FLAG(int, shards, 2, "Shards S.");
ABSL_FLAG(int, workers, 4, "client: worker threads W.");
ABSL_FLAG(int64_t, bytes, 2136596,
          "client: bytes per shard per step, each way (default: half the "
          "tutorial model's float32 variables).");
ABSL_FLAG(double, seconds, 10, "client: measured seconds of each transport.");
ABSL_FLAG(int, rounds, 5,
          "client: alternating rounds the seconds are cut into.");
ABSL_FLAG(std::string, transports, "tcp",
          "UCX transports (UCX_TLS), both sides.");
ABSL_FLAG(std::string, only, "tcp,ucx", "client: which to run.");

namespace psgd {
namespace {

using ps::ucx::Key;
using ps::ucx::Messenger;

// The bench's key: the bench measures, it does not authenticate.
constexpr Key kBenchKey = {};

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

bool Transfer(bool write, int fd, char* p, int64_t n) {
  while (n > 0) {
    const ssize_t r = write ? ::write(fd, p, n) : ::read(fd, p, n);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= r;
  }
  return true;
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

absl::StatusOr<int> ListenTcp(const std::string& address, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Errno("socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen='", address, "' is not an IPv4 address"));
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 64) != 0) {
    return Errno(absl::StrCat("listening on port ", port));
  }
  return fd;
}

absl::StatusOr<int> ConnectTcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) !=
          0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host='", host, "' does not resolve"));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int rc = ::connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (fd < 0 || rc != 0) return Errno(absl::StrCat("connecting to ", host));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// --- server -----------------------------------------------------------------

// A TCP shard: per connection a thread that reads the message size once,
// then echoes messages of that size until EOF.
void ServeTcp(int listen_fd) {
  for (;;) {
    const int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) return;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread([fd] {
      int64_t n = 0;
      if (Transfer(false, fd, reinterpret_cast<char*>(&n), sizeof n) &&
          n >= 0 && n <= (int64_t{1} << 32)) {
        std::string buffer(n, '\0');
        while (Transfer(false, fd, buffer.data(), n) &&
               Transfer(true, fd, buffer.data(), n)) {
        }
      }
      ::close(fd);
    }).detach();
  }
}

// The control port: each byte read is answered with the process's CPU
// seconds so far.
void ServeControl(int listen_fd) {
  for (;;) {
    const int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) return;
    std::thread([fd] {
      char byte;
      while (Transfer(false, fd, &byte, 1)) {
        double cpu = ProcessCpuSeconds();
        if (!Transfer(true, fd, reinterpret_cast<char*>(&cpu), sizeof cpu)) {
          break;
        }
      }
      ::close(fd);
    }).detach();
  }
}

absl::Status RunServer() {
  const int shards = absl::GetFlag(FLAGS_shards);
  const std::string address = absl::GetFlag(FLAGS_listen);
  std::vector<std::unique_ptr<Messenger>> messengers;
  for (int i = 0; i < shards; ++i) {
    ASSIGN_OR_RETURN(const int tcp,
                     ListenTcp(address, absl::GetFlag(FLAGS_tcp_port) + i));
    std::thread(ServeTcp, tcp).detach();
    ps::ucx::MessengerOptions options;
    options.transports = absl::GetFlag(FLAGS_transports);
    ASSIGN_OR_RETURN(std::unique_ptr<Messenger> messenger,
                     Messenger::Create(options));
    Messenger* m = messenger.get();
    RETURN_IF_ERROR(
        m->Listen(
             address, absl::GetFlag(FLAGS_ucx_port) + i,
             [m](ps::ucx::Request request) {
               auto kept =
                   std::make_shared<ps::ucx::Request>(std::move(request));
               m->Respond(kept->peer, kept->call, absl::OkStatus(), "",
                          {{kept->payload.data(), kept->payload.size()}}, kept);
             },
             /*require_key=*/false)
            .status());
    messengers.push_back(std::move(messenger));
  }
  ASSIGN_OR_RETURN(const int control,
                   ListenTcp(address, absl::GetFlag(FLAGS_tcp_port) + shards));
  std::thread(ServeControl, control).detach();
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}

// --- client -----------------------------------------------------------------

struct Tally {
  int64_t steps = 0;
  double seconds = 0;
  double cpu_seconds = 0;  // client and server
};

class Client {
 public:
  absl::Status Start() {
    host_ = absl::GetFlag(FLAGS_host);
    shards_ = absl::GetFlag(FLAGS_shards);
    workers_ = absl::GetFlag(FLAGS_workers);
    bytes_ = absl::GetFlag(FLAGS_bytes);
    ASSIGN_OR_RETURN(
        control_, ConnectTcp(host_, absl::GetFlag(FLAGS_tcp_port) + shards_));
    send_.assign(bytes_, 'x');
    return absl::OkStatus();
  }

  absl::Status StartTcp() {
    for (int w = 0; w < workers_; ++w) {
      for (int i = 0; i < shards_; ++i) {
        ASSIGN_OR_RETURN(const int fd,
                         ConnectTcp(host_, absl::GetFlag(FLAGS_tcp_port) + i));
        int64_t n = bytes_;
        if (!Transfer(true, fd, reinterpret_cast<char*>(&n), sizeof n)) {
          return Errno("tcp: sending the size");
        }
        tcp_fds_.push_back(fd);
        tcp_buffers_.emplace_back(bytes_, 'x');
      }
    }
    return absl::OkStatus();
  }

  absl::Status StartUcx() {
    for (int w = 0; w < workers_; ++w) {
      ps::ucx::MessengerOptions options;
      options.transports = absl::GetFlag(FLAGS_transports);
      ASSIGN_OR_RETURN(std::unique_ptr<Messenger> messenger,
                       Messenger::Create(options));
      std::vector<uint64_t> peers;
      for (int i = 0; i < shards_; ++i) {
        ASSIGN_OR_RETURN(
            const uint64_t peer,
            messenger->Connect(host_, absl::GetFlag(FLAGS_ucx_port) + i));
        peers.push_back(peer);
      }
      messengers_.push_back(std::move(messenger));
      peers_.push_back(std::move(peers));
    }
    return absl::OkStatus();
  }

  // One round of `length` with `body(worker, end)` returning its steps.
  template <typename Body>
  absl::StatusOr<Tally> Round(int threads, absl::Duration length, Body body) {
    ASSIGN_OR_RETURN(const double server_before, ServerCpu());
    const double client_before = ProcessCpuSeconds();
    const absl::Time start = absl::Now();
    const absl::Time end = start + length;
    std::vector<absl::StatusOr<int64_t>> steps(threads, int64_t{0});
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { steps[t] = body(t, end); });
    }
    for (std::thread& t : pool) t.join();
    Tally tally;
    tally.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    ASSIGN_OR_RETURN(const double server_after, ServerCpu());
    tally.cpu_seconds =
        ProcessCpuSeconds() - client_before + server_after - server_before;
    for (const auto& s : steps) {
      if (!s.ok()) return s.status();
      tally.steps += *s;
    }
    return tally;
  }

  absl::StatusOr<Tally> TcpRound(absl::Duration length) {
    ASSIGN_OR_RETURN(
        Tally t,
        Round(workers_ * shards_, length,
              [&](int index, absl::Time end) -> absl::StatusOr<int64_t> {
                const int fd = tcp_fds_[index];
                char* buffer = tcp_buffers_[index].data();
                int64_t echoes = 0;
                while (absl::Now() < end) {
                  if (!Transfer(true, fd, buffer, bytes_) ||
                      !Transfer(false, fd, buffer, bytes_)) {
                    return Errno("tcp echo");
                  }
                  if (absl::Now() < end) ++echoes;
                }
                return echoes;
              }));
    t.steps /= shards_;  // a worker step is an echo with every shard
    return t;
  }

  absl::StatusOr<Tally> UcxRound(absl::Duration length) {
    return Round(
        workers_, length,
        [&](int w, absl::Time end) -> absl::StatusOr<int64_t> {
          Messenger& m = *messengers_[w];
          int64_t steps = 0;
          while (absl::Now() < end) {
            Mutex mu;
            CondVar cv;
            int pending = shards_;
            absl::Status first = absl::OkStatus();
            for (int i = 0; i < shards_; ++i) {
              m.Call(peers_[w][i], 1, kBenchKey, "",
                     {{send_.data(), send_.size()}}, nullptr,
                     absl::Now() + absl::Seconds(60),
                     [&](ps::ucx::Reply reply) {
                       MutexLock lock(&mu);
                       if (!reply.status.ok()) {
                         if (first.ok()) first = reply.status;
                       } else if (reply.payload.size() !=
                                  static_cast<size_t>(bytes_)) {
                         first = absl::DataLossError("ucx echo: short reply");
                       }
                       --pending;
                       cv.SignalAll();
                     });
            }
            MutexLock lock(&mu);
            cv.Wait(&mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
              return pending == 0;
            });
            if (!first.ok()) return first;
            if (absl::Now() < end) ++steps;
          }
          return steps;
        });
  }

  int64_t bytes() const { return bytes_; }
  int shards() const { return shards_; }

 private:
  absl::StatusOr<double> ServerCpu() {
    char byte = 'c';
    double cpu = 0;
    if (!Transfer(true, control_, &byte, 1) ||
        !Transfer(false, control_, reinterpret_cast<char*>(&cpu), sizeof cpu)) {
      return Errno("asking the server for its CPU time");
    }
    return cpu;
  }

  std::string host_;
  int shards_ = 0;
  int workers_ = 0;
  int64_t bytes_ = 0;
  int control_ = -1;
  std::string send_;  // the UCX workers' payload (only read)
  std::vector<int> tcp_fds_;
  std::vector<std::string> tcp_buffers_;
  std::vector<std::unique_ptr<Messenger>> messengers_;
  std::vector<std::vector<uint64_t>> peers_;
};

absl::Status RunClient() {
  const std::string only = absl::GetFlag(FLAGS_only);
  bool tcp = false, ucx = false;
  for (absl::string_view name : absl::StrSplit(only, ',')) {
    if (name == "tcp") {
      tcp = true;
    } else if (name == "ucx") {
      ucx = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--only: '", name, "' is neither tcp nor ucx"));
    }
  }
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  if (rounds < 1 || seconds <= 0 || absl::GetFlag(FLAGS_workers) < 1 ||
      absl::GetFlag(FLAGS_shards) < 1 || absl::GetFlag(FLAGS_bytes) < 1) {
    return absl::InvalidArgumentError(
        "--rounds, --seconds, --workers, --shards and --bytes must be "
        "positive");
  }
  absl::StatusOr<CpuInfo> cpu = ReadCpuInfo();
  std::printf("cpu: %s\n", cpu.ok()
                               ? cpu->Describe().c_str()
                               : std::string(cpu.status().message()).c_str());
  Client client;
  RETURN_IF_ERROR(client.Start());
  if (tcp) RETURN_IF_ERROR(client.StartTcp());
  if (ucx) RETURN_IF_ERROR(client.StartUcx());
  std::printf(
      "shards %d, workers %d, %lld bytes per shard each way, UCX "
      "transports %s, %d rounds of %.1f s each\n",
      client.shards(), absl::GetFlag(FLAGS_workers),
      static_cast<long long>(client.bytes()),
      absl::GetFlag(FLAGS_transports).c_str(), rounds, seconds / rounds);
  // A warmup of each, then alternating rounds.
  const absl::Duration round = absl::Seconds(seconds / rounds);
  if (tcp) RETURN_IF_ERROR(client.TcpRound(absl::Seconds(1)).status());
  if (ucx) RETURN_IF_ERROR(client.UcxRound(absl::Seconds(1)).status());
  Tally tcp_total, ucx_total;
  for (int r = 0; r < rounds; ++r) {
    for (bool is_tcp : {true, false}) {
      if (is_tcp ? !tcp : !ucx) continue;
      ASSIGN_OR_RETURN(
          Tally t, is_tcp ? client.TcpRound(round) : client.UcxRound(round));
      Tally& total = is_tcp ? tcp_total : ucx_total;
      total.steps += t.steps;
      total.seconds += t.seconds;
      total.cpu_seconds += t.cpu_seconds;
    }
  }
  const double step_bytes = 2.0 * client.bytes() * client.shards();
  auto report = [&](const char* name, const Tally& t) {
    std::printf(
        "%s echo: %.1f worker steps/s, %.3f GB/s, cpu %.2f ms per "
        "worker step (client and server)\n",
        name, t.steps / t.seconds, t.steps * step_bytes / t.seconds / 1e9,
        t.steps > 0 ? 1e3 * t.cpu_seconds / t.steps : 0.0);
  };
  if (tcp) report("tcp", tcp_total);
  if (ucx) report("ucx", ucx_total);
  if (tcp && ucx && tcp_total.steps > 0 && ucx_total.steps > 0) {
    std::printf("ucx_vs_tcp=%.3f\n", (ucx_total.steps / ucx_total.seconds) /
                                         (tcp_total.steps / tcp_total.seconds));
    std::printf("ucx_cpu_vs_tcp=%.3f\n",
                (ucx_total.cpu_seconds / ucx_total.steps) /
                    (tcp_total.cpu_seconds / tcp_total.steps));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string role = absl::GetFlag(FLAGS_role);
  absl::Status status;
  if (role == "server") {
    status = psgd::RunServer();
  } else if (role == "client") {
    status = psgd::RunClient();
  } else {
    status = absl::InvalidArgumentError(
        absl::StrCat("--role='", role, "': server or client"));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "ucx_echo_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
