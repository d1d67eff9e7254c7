// ps_bench: parameter-server throughput against a bare gRPC echo and a
// plain TCP echo of the same bytes, in one process on loopback: how much of
// what the machine's sockets and gRPC move the parameter server keeps.
// (ps_cluster_bench measures running ps_server tasks of a config.)
//
//   bazel run -c opt //worker/bench:ps_bench -- --shards=2 --workers=4
//   --seconds=10 bazel-bin/worker/bench/ps_bench --wire=bf16   # also the
//   servers with bf16
//
// Parameter server: S shard servers (PsGrpcServer) hold a model's variables
// placed over them (--model: the TF cifar10 tutorial model by default,
// 1,068,298 float32 parameters; any of the registry, e.g. wrn_28_10 with
// 36.5M, its batch norm statistics included); W worker
// threads, each with its own RemotePsClient (own connections), loop push ->
// pull of a synthetic gradient (no compute) as a worker does: sync (N = M =
// W) waits for the next step, async takes the newest weights (ps_load.h).
// Echo: S bare echo servers; W threads, each with its own channels, echo
// each shard's bytes to its echo server in parallel: the same bytes up
// (push) and down (pull) per step, with nothing of the parameter server.
// TCP: S plain TCP echo servers (a thread per connection) and, for each
// worker and shard, a thread with its own connection that sends the shard's
// bytes and reads them back: what this machine moves over loopback sockets
// with the same threads and no protocol. With --wire=bf16 (or fp16) a
// second set of shard servers takes bfloat16 gradients and answers with
// bfloat16 weights (the cluster config's wire block). The floor: the same
// shards and clients in this process with no transport between them (each
// client's requests handed to the shards' request handlers: the checks,
// the sum, the optimizer and every copy a push and a pull make, no bytes
// through a socket); cpu_floor_ms is its CPU per worker step plus the TCP
// echo's (the least a step's bytes cost through the kernel), and each
// transport's ratio_vs_floor its own CPU per worker step over that.
// --only=...,ucx adds a set of shard servers and clients whose pushes and pulls
// go over UCX
// (--ucx_transports, default tcp; docs/PS.md "Tensors over UCX"), printed
// with ucx_ratio_vs_tcp and ucx_vs_grpc (worker steps/s against the gRPC
// set's).
// After a warmup of each, they alternate in --rounds rounds of
// --seconds / --rounds each, so that all see the same background load.
// It prints ratio_vs_grpc_echo=<ps GB/s / echo GB/s> (float32 on the wire),
// ratio_vs_tcp=<ps GB/s / tcp GB/s> and, with --wire,
// ratio_bf16_vs_fp32=<worker steps/s with the wire dtype / with float32>.
// --memory_steps=K: then K more steps with each shard's memory, item by
// item (docs/PS.md, "Memory").
//
// Until 2026-11-26 this was //ps:ps_bench (bazel-bin/ps/ps_bench), with the
// cluster mode as --config; docs/PERFORMANCE.md's older figures name it so.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/malloc_tuning.h"
#include "common/metrics.h"
#include "common/model_variables.h"
#include "common/mutex_tuning.h"
#include "common/status_macros.h"
#include "proto/echo.grpc.pb.h"
#include "ps/client/grpc_channel.h"
#include "ps/client/remote_client.h"
#include "ps/server/grpc_server.h"
#include "ps/shard/shard.h"
#include "ps/testing/in_process_client.h"
#include "ps/wire/wire_dtype.h"
#include "worker/bench/ps_load.h"
#include "worker/models/registry.h"

ABSL_FLAG(int, shards, 2, "Parameter-server shards S.");
ABSL_FLAG(int, workers, 4, "Worker threads W.");
ABSL_FLAG(double, seconds, 10, "Measured seconds of each of the two.");
ABSL_FLAG(int, rounds, 5, "Alternating rounds the seconds are cut into.");
ABSL_FLAG(double, warmup_seconds, 1, "Unmeasured seconds of each first.");
ABSL_FLAG(std::string, mode, "sync", "sync (N = M = W) or async.");
ABSL_FLAG(int64_t, split_threshold_bytes, int64_t{1} << 20,
          "Split threshold of the placement.");
ABSL_FLAG(std::string, wire, "fp32",
          "fp32, bf16 or fp16: with bf16 or fp16 the parameter server also "
          "runs with that dtype on the wire (gradients and weights).");
ABSL_FLAG(std::string, only, "ps,floor,echo,tcp",
          "Which to run, of ps (and the --wire one), ucx (the parameter "
          "server with pushes and pulls over UCX), floor (the same shards "
          "and clients in this process, no transport), echo and tcp.");
ABSL_FLAG(std::string, ucx_transports, "tcp",
          "The UCX transports of --only=ucx (as UCX_TLS names them).");
ABSL_FLAG(int, memory_steps, 0,
          "After the rounds, this many more steps of each fp32 worker, with "
          "each shard's memory item by item (weights, other weight versions, "
          "optimizer slots, the aggregate, staged parts, pushes in flight "
          "and kept push buffers) and the process's resident memory every "
          "tenth of them: whether memory stays flat (docs/PS.md, "
          "\"Memory\"). 0: none.");
ABSL_FLAG(std::string, model, "",
          "The model whose variables travel: a name of the registry "
          "(worker --list_models), with its batch norm statistics on the "
          "servers; empty: the TF cifar10 tutorial model.");

namespace psgd {
namespace ps {
namespace {

class EchoService final : public echo::Echo::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx,
                                 const echo::EchoMessage* request,
                                 echo::EchoMessage* reply) override {
    reply->set_payload(request->payload());
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// Echo servers, one per shard, and each worker's stubs and messages (a
// shard's bytes), kept from round to round.
class EchoBench {
 public:
  ~EchoBench() {
    for (auto& s : servers_) s->Shutdown();
  }

  absl::Status Start(const std::vector<int64_t>& shard_bytes, int workers) {
    for (size_t i = 0; i < shard_bytes.size(); ++i) {
      int port = 0;
      grpc::ServerBuilder builder;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &port);
      services_.push_back(std::make_unique<EchoService>());
      builder.RegisterService(services_.back().get());
      builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
      builder.SetMaxSendMessageSize(kMaxMessageBytes);
      servers_.push_back(builder.BuildAndStart());
      if (servers_.back() == nullptr || port == 0) {
        return absl::UnavailableError("an echo server did not start");
      }
      addresses_.push_back("127.0.0.1:" + std::to_string(port));
    }
    workers_.resize(workers);
    for (Worker& w : workers_) {
      for (size_t i = 0; i < shard_bytes.size(); ++i) {
        w.stubs.push_back(echo::Echo::NewStub(
            CreatePsChannel(addresses_[i], kMaxMessageBytes)));
        w.requests.emplace_back().set_payload(std::string(shard_bytes[i], 'x'));
      }
      w.replies.resize(shard_bytes.size());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Tally> Round(absl::Duration length) {
    return RunRound(static_cast<int>(workers_.size()), length,
                    [&](int index, absl::Time end) -> absl::StatusOr<int64_t> {
                      Worker& w = workers_[index];
                      int64_t steps = 0;
                      while (absl::Now() < end) {
                        RETURN_IF_ERROR(CallInParallel(
                            addresses_, "echo", absl::Now() + absl::Seconds(60),
                            [&](int i, grpc::ClientContext* ctx, auto done) {
                              w.stubs[i]->async()->Echo(ctx, &w.requests[i],
                                                        &w.replies[i],
                                                        std::move(done));
                            }));
                        if (absl::Now() < end) ++steps;
                      }
                      return steps;
                    });
  }

 private:
  struct Worker {
    std::vector<std::unique_ptr<echo::Echo::Stub>> stubs;
    std::vector<echo::EchoMessage> requests, replies;
  };
  std::vector<std::unique_ptr<EchoService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
  std::vector<Worker> workers_;
};

// Plain TCP echo: per shard a listening socket and a thread per
// connection that reads the shard's bytes and writes them back; per worker
// and shard a connection and a thread that sends and reads them, each
// worker's S threads independently (a worker step is S shard echoes).
class TcpEchoBench {
 public:
  ~TcpEchoBench() {
    for (int fd : client_fds_) ::close(fd);  // the servers see EOF
    for (std::thread& t : server_threads_) t.join();
    for (int fd : listen_fds_) ::close(fd);
  }

  absl::Status Start(const std::vector<int64_t>& shard_bytes, int workers) {
    shard_bytes_ = shard_bytes;
    workers_ = workers;
    const int shards = static_cast<int>(shard_bytes.size());
    std::vector<int> ports;
    for (int i = 0; i < shards; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) return Errno("socket");
      listen_fds_.push_back(fd);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof(a);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
          ::listen(fd, 64) != 0 ||
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        return Errno("bind/listen");
      }
      ports.push_back(ntohs(a.sin_port));
    }
    for (int w = 0; w < workers; ++w) {
      for (int i = 0; i < shards; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return Errno("socket");
        client_fds_.push_back(fd);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(ports[i]);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
          return Errno("connect");
        }
        NoDelay(fd);
        const int server_fd = ::accept(listen_fds_[i], nullptr, nullptr);
        if (server_fd < 0) return Errno("accept");
        NoDelay(server_fd);
        const int64_t n = shard_bytes[i];
        server_threads_.emplace_back([server_fd, n] {
          std::string buffer(n, '\0');
          while (ReadAll(server_fd, buffer.data(), n) &&
                 WriteAll(server_fd, buffer.data(), n)) {
          }
          ::close(server_fd);
        });
        buffers_.emplace_back(n, 'x');
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Tally> Round(absl::Duration length) {
    const int shards = static_cast<int>(shard_bytes_.size());
    ASSIGN_OR_RETURN(
        Tally t,
        RunRound(workers_ * shards, length,
                 [&](int index, absl::Time end) -> absl::StatusOr<int64_t> {
                   const int fd = client_fds_[index];
                   const int64_t n = shard_bytes_[index % shards];
                   std::string& buffer = buffers_[index];
                   int64_t echoes = 0;
                   while (absl::Now() < end) {
                     if (!WriteAll(fd, buffer.data(), n) ||
                         !ReadAll(fd, buffer.data(), n)) {
                       return Errno("tcp echo");
                     }
                     if (absl::Now() < end) ++echoes;
                   }
                   return echoes;
                 }));
    // Worker steps: S shard echoes each (RunRound summed them).
    t.steps /= shards;
    return t;
  }

 private:
  static absl::Status Errno(absl::string_view what) {
    return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
  }
  static void NoDelay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  // read() or write() until n bytes moved; false on an error or EOF.
  template <typename Pointer, typename Io>
  static bool Transfer(Io io, int fd, Pointer p, int64_t n) {
    while (n > 0) {
      const ssize_t r = io(fd, p, n);
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        return false;
      }
      p += r;
      n -= r;
    }
    return true;
  }
  static bool ReadAll(int fd, char* p, int64_t n) {
    return Transfer(::read, fd, p, n);
  }
  static bool WriteAll(int fd, const char* p, int64_t n) {
    return Transfer(::write, fd, p, n);
  }

  std::vector<int64_t> shard_bytes_;
  int workers_ = 0;
  std::vector<int> listen_fds_, client_fds_;
  std::vector<std::thread> server_threads_;
  std::vector<std::string> buffers_;  // per (worker, shard)
};

// User + system CPU seconds of this process so far.
double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double Mb(int64_t bytes) { return bytes / 1e6; }

constexpr char kFloorName[] = "in process (no transport)";

// --memory_steps: `steps` more steps of every worker of `ps`, and each
// shard's memory item by item with the process's resident memory every
// tenth of them. Prints one line per shard and sample, and the spread of
// the resident memory after the first sample.
absl::Status MemoryRun(ParameterServerBench* ps, int64_t steps,
                       const Placement& placement) {
  std::printf(
      "memory over %lld steps of each worker (MB; a shard's share of the "
      "model in float32 beside its items):\n",
      static_cast<long long>(steps));
  std::printf("%-6s %-6s %-8s %-8s %-9s %-8s %-9s %-7s %-9s %-9s %-8s %-8s\n",
              "steps", "shard", "share", "weights", "versions", "slots",
              "aggregate", "staged", "in_flight", "push_bufs", "total", "rss");
  std::vector<int64_t> rss;
  const int64_t chunk = std::max<int64_t>(1, steps / 10);
  for (int64_t done = 0; done < steps;) {
    const int64_t k = std::min(chunk, steps - done);
    RETURN_IF_ERROR(ps->Steps(k));
    done += k;
    ASSIGN_OR_RETURN(std::vector<ShardStatus> shards, ps->Status());
    rss.push_back(ResidentMemoryBytes());
    for (const ShardStatus& s : shards) {
      const ShardMemory& m = s.memory;
      std::printf(
          "%-6lld %-6d %-8.1f %-8.1f %-9.1f %-8.1f %-9.1f %-7.1f %-9.1f "
          "%-9.1f %-8.1f %-8.1f\n",
          static_cast<long long>(done), s.shard_index,
          Mb(placement.shard_bytes[s.shard_index]), Mb(m.weights),
          Mb(m.weight_versions), Mb(m.optimizer_slots), Mb(m.aggregate),
          Mb(m.staged_parts), Mb(m.pushes_in_flight), Mb(m.push_buffers),
          Mb(m.Total()), Mb(rss.back()));
    }
    std::fflush(stdout);
  }
  if (rss.size() > 1) {
    const auto [lo, hi] = std::minmax_element(rss.begin() + 1, rss.end());
    std::printf("rss_after_first_tenth_mb=%.1f..%.1f rss_growth_mb=%.1f\n",
                Mb(*lo), Mb(*hi), Mb(rss.back() - rss[1]));
  }
  return absl::OkStatus();
}

// One of the things measured, with its tally over the rounds.
struct Measured {
  Measured(std::string name,
           std::function<absl::StatusOr<Tally>(absl::Duration)> round,
           int64_t bytes_per_step)
      : name(std::move(name)),
        round(std::move(round)),
        bytes_per_step(bytes_per_step) {}
  std::string name;
  std::function<absl::StatusOr<Tally>(absl::Duration)> round;
  int64_t bytes_per_step = 0;
  Tally total;
  double cpu_seconds = 0;  // the process's user + system time in rounds
  double cpu_ms_per_step() const { return cpu_seconds * 1e3 / total.steps; }
  double steps_per_s() const { return total.steps / total.seconds; }
  double gb_per_s() const { return total.gb_per_s(bytes_per_step); }
};

absl::Status Run(Mode mode, int shards, int workers, DType wire,
                 const std::vector<std::string>& only) {
  auto wanted = [&](absl::string_view what) {
    return std::find(only.begin(), only.end(), what) != only.end();
  };
  const std::string model = absl::GetFlag(FLAGS_model).empty()
                                ? "cifar10_tutorial"
                                : absl::GetFlag(FLAGS_model);
  ASSIGN_OR_RETURN(const std::vector<VariableSpec> specs,
                   ServerVariables(model, /*local_statistics=*/false));
  ASSIGN_OR_RETURN(Placement placement,
                   PlaceVariables(specs, shards,
                                  absl::GetFlag(FLAGS_split_threshold_bytes)));
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const absl::Duration warmup =
      absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds));
  const absl::Duration round =
      absl::Seconds(absl::GetFlag(FLAGS_seconds)) / rounds;
  const int64_t model_bytes = TotalParameters(specs) * 4;
  const int64_t bytes_per_step = 2 * model_bytes;  // push up + pull down
  std::printf(
      "ps_bench: model %s, %lld float32 values (%.2f MB), "
      "%d shards, %d workers, %s; %d alternating rounds of %.1f s each after "
      "%.1f s warmup; loopback, servers and workers in one process\n",
      model.c_str(), static_cast<long long>(TotalParameters(specs)),
      model_bytes / 1e6, shards, workers,
      mode == Mode::kSync ? absl::StrFormat("sync N=M=%d", workers).c_str()
                          : "async",
      rounds, absl::ToDoubleSeconds(round), absl::ToDoubleSeconds(warmup));
  for (int i = 0; i < shards; ++i) {
    std::printf("  shard %d: %lld bytes in %zu slices\n", i,
                static_cast<long long>(placement.shard_bytes[i]),
                placement.shard_slices[i].size());
  }
  std::fflush(stdout);

  std::vector<Measured> measured;
  ParameterServerBench ps(specs), ps_wire(specs), ps_ucx(specs),
      ps_floor(specs);
  ps_floor.set_split_threshold_bytes(
      absl::GetFlag(FLAGS_split_threshold_bytes));
  std::vector<std::unique_ptr<ParameterShard>> floor_shards;
  ps.set_split_threshold_bytes(absl::GetFlag(FLAGS_split_threshold_bytes));
  ps_wire.set_split_threshold_bytes(absl::GetFlag(FLAGS_split_threshold_bytes));
  ps_ucx.set_split_threshold_bytes(absl::GetFlag(FLAGS_split_threshold_bytes));
  ps_ucx.set_ucx(absl::GetFlag(FLAGS_ucx_transports));
  EchoBench echo;
  TcpEchoBench tcp;
  if (wanted("ps")) {
    RETURN_IF_ERROR(ps.Start(mode, shards, workers, DType::kFloat32));
    measured.push_back({"parameter server (fp32)",
                        [&](absl::Duration d) { return ps.Round(d); },
                        ps.StepBytes()});
    if (wire != DType::kFloat32) {
      RETURN_IF_ERROR(ps_wire.Start(mode, shards, workers, wire));
      measured.push_back(
          {absl::StrCat("parameter server (", DTypeName(wire), ")"),
           [&](absl::Duration d) { return ps_wire.Round(d); },
           ps_wire.StepBytes()});
    }
  }
  const std::string ucx_name = absl::StrCat(
      "parameter server over UCX (", absl::GetFlag(FLAGS_ucx_transports), ")");
  if (wanted("ucx")) {
    RETURN_IF_ERROR(ps_ucx.Start(mode, shards, workers, DType::kFloat32));
    measured.push_back({ucx_name,
                        [&](absl::Duration d) { return ps_ucx.Round(d); },
                        ps_ucx.StepBytes()});
  }
  if (wanted("floor")) {
    std::vector<ParameterShard*> raw;
    for (int i = 0; i < shards; ++i) {
      ASSIGN_OR_RETURN(std::unique_ptr<ParameterShard> shard,
                       ParameterShard::Create(
                           ps_floor.OptionsOfShard(mode, i, shards, workers)));
      raw.push_back(shard.get());
      floor_shards.push_back(std::move(shard));
    }
    ps_floor.set_mode_and_wire(mode, DType::kFloat32);
    RETURN_IF_ERROR(ps_floor.ConnectClients(
        [raw, placement](
            int worker) -> absl::StatusOr<std::unique_ptr<ShardedPsClient>> {
          return InProcessPsClient::Create(raw, placement, kCluster, worker);
        },
        shards, workers, 0));
    measured.push_back({kFloorName,
                        [&](absl::Duration d) { return ps_floor.Round(d); },
                        ps_floor.StepBytes()});
  }
  if (wanted("echo")) {
    RETURN_IF_ERROR(echo.Start(placement.shard_bytes, workers));
    measured.push_back({"grpc echo",
                        [&](absl::Duration d) { return echo.Round(d); },
                        bytes_per_step});
  }
  if (wanted("tcp")) {
    RETURN_IF_ERROR(tcp.Start(placement.shard_bytes, workers));
    measured.push_back({"tcp echo",
                        [&](absl::Duration d) { return tcp.Round(d); },
                        bytes_per_step});
  }
  for (Measured& m : measured) RETURN_IF_ERROR(m.round(warmup).status());
  for (int r = 0; r < rounds; ++r) {
    for (Measured& m : measured) {
      const double cpu_before = ProcessCpuSeconds();
      ASSIGN_OR_RETURN(Tally t, m.round(round));
      m.cpu_seconds += ProcessCpuSeconds() - cpu_before;
      m.total.Add(t);
    }
  }
  const Measured* fp32 = nullptr;
  const Measured* narrow = nullptr;
  const Measured* grpc_echo = nullptr;
  const Measured* tcp_echo = nullptr;
  const Measured* ucx = nullptr;
  const Measured* floor = nullptr;
  for (const Measured& m : measured) {
    std::printf(
        "%-26s %7.1f worker steps/s, %.3f GB/s pushed + pulled, %.2f CPU "
        "ms per worker step\n",
        (m.name + ":").c_str(), m.steps_per_s(), m.gb_per_s(),
        m.cpu_ms_per_step());
    if (m.name == "parameter server (fp32)") fp32 = &m;
    if (m.name == ucx_name) ucx = &m;
    if (m.name == kFloorName) floor = &m;
    if (absl::StartsWith(m.name, "parameter server (") && &m != fp32 &&
        &m != floor) {
      narrow = &m;
    }
    if (m.name == "grpc echo") grpc_echo = &m;
    if (m.name == "tcp echo") tcp_echo = &m;
  }
  if (fp32 != nullptr) {
    ASSIGN_OR_RETURN(int64_t global_steps, ps.Step());
    std::printf("(%lld shard steps of the fp32 servers in all)\n",
                static_cast<long long>(global_steps));
  }
  if (grpc_echo != nullptr && tcp_echo != nullptr) {
    std::printf("grpc_echo_vs_tcp=%.3f\n",
                grpc_echo->gb_per_s() / tcp_echo->gb_per_s());
  }
  if (fp32 != nullptr && tcp_echo != nullptr) {
    std::printf("ratio_vs_tcp=%.3f\n", fp32->gb_per_s() / tcp_echo->gb_per_s());
  }
  if (fp32 != nullptr && narrow != nullptr) {
    std::printf("ratio_%s_vs_fp32=%.3f\n", absl::GetFlag(FLAGS_wire).c_str(),
                narrow->steps_per_s() / fp32->steps_per_s());
  }
  if (fp32 != nullptr && grpc_echo != nullptr) {
    std::printf("ratio_vs_grpc_echo=%.3f\n",
                fp32->gb_per_s() / grpc_echo->gb_per_s());
  }
  if (ucx != nullptr) {
    std::printf("(%.1f MB sent over UCX by the UCX set's workers)\n",
                ps_ucx.UcxBytesSent() / 1e6);
  }
  if (ucx != nullptr && tcp_echo != nullptr) {
    std::printf("ucx_ratio_vs_tcp=%.3f\n",
                ucx->gb_per_s() / tcp_echo->gb_per_s());
  }
  if (ucx != nullptr && fp32 != nullptr) {
    std::printf("ucx_vs_grpc=%.3f\n", ucx->steps_per_s() / fp32->steps_per_s());
  }
  if (floor != nullptr && tcp_echo != nullptr) {
    // The least a worker step can cost: the shards' and clients' own work
    // and the kernel's for the step's bytes. Each transport's CPU per
    // worker step against it.
    const double floor_ms =
        floor->cpu_ms_per_step() + tcp_echo->cpu_ms_per_step();
    std::printf("cpu_floor_ms=%.3f (in process %.3f + tcp echo %.3f)\n",
                floor_ms, floor->cpu_ms_per_step(),
                tcp_echo->cpu_ms_per_step());
    if (fp32 != nullptr) {
      std::printf("ratio_vs_floor=%.3f\n", fp32->cpu_ms_per_step() / floor_ms);
    }
    if (ucx != nullptr) {
      std::printf("ucx_ratio_vs_floor=%.3f\n",
                  ucx->cpu_ms_per_step() / floor_ms);
    }
  }
  if (const int64_t steps = absl::GetFlag(FLAGS_memory_steps);
      steps > 0 && fp32 != nullptr) {
    std::fflush(stdout);
    RETURN_IF_ERROR(MemoryRun(&ps, steps, placement));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ps
}  // namespace psgd

int main(int argc, char** argv) {
  // As ps_server and the worker set it (common/malloc_tuning.h), so that the
  // figures are theirs; MALLOC_TRIM_THRESHOLD_ etc. in the environment
  // leave glibc's own behaviour to compare.
  const std::string malloc_tuning = psgd::TuneMallocForTensors();
  const std::string mutex_tuning = psgd::TuneMutexesForServing();
  absl::ParseCommandLine(argc, argv);
  std::printf("ps_bench: %s\n", malloc_tuning.c_str());
  std::printf("ps_bench: %s\n", mutex_tuning.c_str());
  const int workers = absl::GetFlag(FLAGS_workers);
  absl::StatusOr<psgd::ps::Mode> mode =
      psgd::ps::ParseMode(absl::GetFlag(FLAGS_mode));
  absl::StatusOr<psgd::ps::DType> wire =
      psgd::ps::ParseWireDType(absl::GetFlag(FLAGS_wire));
  const int shards = absl::GetFlag(FLAGS_shards);
  if (!mode.ok() || !wire.ok() || shards < 1 || workers < 1) {
    std::fprintf(stderr,
                 "ps_bench: bad --mode, --wire, --shards or --workers\n");
    return 2;
  }
  const std::vector<std::string> only =
      absl::StrSplit(absl::GetFlag(FLAGS_only), ',');
  for (const std::string& what : only) {
    if (what != "ps" && what != "ucx" && what != "floor" && what != "echo" &&
        what != "tcp") {
      std::fprintf(stderr,
                   "ps_bench: --only names '%s'; it takes ps, ucx, floor, "
                   "echo and tcp\n",
                   what.c_str());
      return 2;
    }
  }
  if (absl::Status s = psgd::ps::Run(*mode, shards, workers, *wire, only);
      !s.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
