// ps_bench: parameter-server throughput against a bare gRPC echo of the
// same bytes, in one process on loopback.
//
//   bazel run -c opt //ps:ps_bench -- --shards=2 --workers=4 --seconds=10
//
// Parameter server: S shard servers (PsGrpcServer) hold the TF cifar10
// tutorial model (1,068,298 float32 parameters) placed over them; W worker
// threads, each with its own GrpcPsClient (own connections), loop push ->
// pull of a synthetic gradient (no compute) as a worker does: sync (N = M =
// W) waits for the next step, async takes the newest weights.
// Echo: S bare echo servers; W threads, each with its own channels, echo
// each shard's bytes to its echo server in parallel: the same bytes up
// (push) and down (pull) per step, with nothing of the parameter server.
// After a warmup of each, the two alternate in --rounds rounds of
// --seconds / --rounds each, so that both see the same background load.
// The last line is ratio_vs_grpc_echo=<ps GB/s / echo GB/s>.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "proto/echo.grpc.pb.h"
#include "ps/client/grpc_client.h"
#include "ps/server/grpc_server.h"

ABSL_FLAG(int, shards, 2, "Parameter-server shards S.");
ABSL_FLAG(int, workers, 4, "Worker threads W.");
ABSL_FLAG(double, seconds, 10, "Measured seconds of each of the two.");
ABSL_FLAG(int, rounds, 5, "Alternating rounds the seconds are cut into.");
ABSL_FLAG(double, warmup_seconds, 1, "Unmeasured seconds of each first.");
ABSL_FLAG(std::string, mode, "sync", "sync (N = M = W) or async.");
ABSL_FLAG(int64_t, split_threshold_bytes, int64_t{1} << 20,
          "Split threshold of the placement.");

namespace psgd {
namespace ps {
namespace {

constexpr int64_t kMaxMessageBytes = int64_t{256} << 20;
constexpr char kCluster[] = "bench";

// Worker steps completed while a round ran, and its length.
struct Tally {
  int64_t steps = 0;
  double seconds = 0;
  double gb_per_s(int64_t bytes_per_step) const {
    return steps * static_cast<double>(bytes_per_step) / seconds / 1e9;
  }
  void Add(const Tally& t) {
    steps += t.steps;
    seconds += t.seconds;
  }
};

// Runs body(worker, round_end) on `workers` threads; each returns the steps
// it completed before round_end. The first error wins.
absl::StatusOr<Tally> RunRound(
    int workers, absl::Duration length,
    const std::function<absl::StatusOr<int64_t>(int, absl::Time)>& body) {
  const absl::Time end = absl::Now() + length;
  std::vector<absl::StatusOr<int64_t>> steps(workers, int64_t{0});
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] { steps[w] = body(w, end); });
  }
  for (std::thread& t : threads) t.join();
  Tally tally{0, absl::ToDoubleSeconds(length)};
  for (const absl::StatusOr<int64_t>& s : steps) {
    if (!s.ok()) return s.status();
    tally.steps += *s;
  }
  return tally;
}

std::vector<Tensor> Filled(const std::vector<VariableSpec>& specs,
                           float value) {
  std::vector<Tensor> out;
  for (const VariableSpec& s : specs) {
    out.emplace_back(s.shape);
    out.back().Fill(value);
  }
  return out;
}

// Shard servers, a client per worker and each worker's state, kept from
// round to round.
class ParameterServerBench {
 public:
  absl::Status Start(Mode mode, int shards, int workers) {
    mode_ = mode;
    for (int i = 0; i < shards; ++i) {
      ServerOptions o;
      o.shard_index = i;
      o.num_shards = shards;
      o.cluster_name = kCluster;
      o.mode = mode;
      o.total_num_replicas = workers;
      o.replicas_to_aggregate = mode == Mode::kSync ? workers : 1;
      o.max_message_bytes = kMaxMessageBytes;
      o.split_threshold_bytes = absl::GetFlag(FLAGS_split_threshold_bytes);
      ASSIGN_OR_RETURN(std::unique_ptr<PsGrpcServer> server,
                       PsGrpcServer::Start(o));
      addresses_.push_back(server->address());
      servers_.push_back(std::move(server));
    }
    ASSIGN_OR_RETURN(chief_, Client(-1));
    const std::vector<Tensor> initial = Filled(specs_, 0.01f);
    RETURN_IF_ERROR(chief_->Initialize(ConstViews(initial)));
    for (int w = 0; w < workers; ++w) {
      ASSIGN_OR_RETURN(std::unique_ptr<GrpcPsClient> c, Client(w));
      RETURN_IF_ERROR(c->Join());
      clients_.push_back(std::move(c));
      weights_.push_back(Filled(specs_, 0));
      grads_.push_back(Filled(specs_, 1e-3f * (w + 1)));
      versions_.push_back(ModelVersion::AtLeast(shards, 0));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Tally> Round(absl::Duration length) {
    // Sync: the first worker to see the round end picks the last step,
    // and every worker goes on to it, so that no worker is left waiting
    // for a push that would only come in the next round.
    std::atomic<int64_t> stop_step{std::numeric_limits<int64_t>::max()};
    return RunRound(
        static_cast<int>(clients_.size()), length,
        [&](int w, absl::Time end) -> absl::StatusOr<int64_t> {
          ModelVersion& v = versions_[w];
          int64_t steps = 0;
          for (;;) {
            if (absl::Now() >= end) {
              if (mode_ == Mode::kAsync) break;
              int64_t want = v.steps[0] + 1, seen = stop_step.load();
              while (want < seen &&
                     !stop_step.compare_exchange_weak(seen, want)) {
              }
            }
            if (mode_ == Mode::kSync && v.steps[0] >= stop_step.load()) break;
            RETURN_IF_ERROR(
                clients_[w]->Push(v, ConstViews(grads_[w])).status());
            ASSIGN_OR_RETURN(
                v, clients_[w]->Pull(
                       mode_ == Mode::kSync
                           ? v.Next()
                           : ModelVersion::AtLeast(
                                 static_cast<int>(v.steps.size()), 0),
                       absl::Now() + absl::Seconds(60), Views(weights_[w])));
            if (absl::Now() < end) ++steps;
          }
          return steps;
        });
  }

  absl::StatusOr<int64_t> Step() {
    ASSIGN_OR_RETURN(std::vector<ShardStatus> s, chief_->Status());
    return s[0].step;
  }

 private:
  absl::StatusOr<std::unique_ptr<GrpcPsClient>> Client(int worker) {
    GrpcClientOptions o;
    o.addresses = addresses_;
    o.cluster = kCluster;
    o.worker_id = worker;
    o.variables = specs_;
    o.split_threshold_bytes = absl::GetFlag(FLAGS_split_threshold_bytes);
    o.max_message_bytes = kMaxMessageBytes;
    return GrpcPsClient::Create(o);
  }
  std::vector<NamedConstTensorView> ConstViews(const std::vector<Tensor>& t) {
    std::vector<NamedConstTensorView> out;
    for (size_t i = 0; i < specs_.size(); ++i) {
      out.push_back({specs_[i].name, t[i].view()});
    }
    return out;
  }
  std::vector<NamedTensorView> Views(std::vector<Tensor>& t) {
    std::vector<NamedTensorView> out;
    for (size_t i = 0; i < specs_.size(); ++i) {
      out.push_back({specs_[i].name, t[i].view()});
    }
    return out;
  }

  const std::vector<VariableSpec> specs_ = Cifar10TutorialVariables();
  Mode mode_ = Mode::kSync;
  std::vector<std::unique_ptr<PsGrpcServer>> servers_;
  std::vector<std::string> addresses_;
  std::unique_ptr<GrpcPsClient> chief_;
  std::vector<std::unique_ptr<GrpcPsClient>> clients_;
  std::vector<std::vector<Tensor>> weights_, grads_;
  std::vector<ModelVersion> versions_;
};

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
      builder.RegisterService(&service_);
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
  EchoService service_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
  std::vector<Worker> workers_;
};

absl::Status Run(Mode mode, int shards, int workers) {
  const std::vector<VariableSpec> specs = Cifar10TutorialVariables();
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
      "ps_bench: cifar10 tutorial model, %lld float32 parameters (%.2f MB), "
      "%d shards, %d workers, %s; %d alternating rounds of %.1f s each after "
      "%.1f s warmup; loopback, servers and workers in one process\n",
      static_cast<long long>(TotalParameters(specs)), model_bytes / 1e6, shards,
      workers,
      mode == Mode::kSync ? absl::StrFormat("sync N=M=%d", workers).c_str()
                          : "async",
      rounds, absl::ToDoubleSeconds(round), absl::ToDoubleSeconds(warmup));
  for (int i = 0; i < shards; ++i) {
    std::printf("  shard %d: %lld bytes in %zu slices\n", i,
                static_cast<long long>(placement.shard_bytes[i]),
                placement.shard_slices[i].size());
  }
  std::fflush(stdout);

  ParameterServerBench ps;
  RETURN_IF_ERROR(ps.Start(mode, shards, workers));
  EchoBench echo;
  RETURN_IF_ERROR(echo.Start(placement.shard_bytes, workers));
  RETURN_IF_ERROR(ps.Round(warmup).status());
  RETURN_IF_ERROR(echo.Round(warmup).status());
  Tally ps_total, echo_total;
  for (int r = 0; r < rounds; ++r) {
    ASSIGN_OR_RETURN(Tally p, ps.Round(round));
    ASSIGN_OR_RETURN(Tally e, echo.Round(round));
    ps_total.Add(p);
    echo_total.Add(e);
  }
  ASSIGN_OR_RETURN(int64_t global_steps, ps.Step());
  std::printf(
      "parameter server: %.1f worker steps/s, %.3f GB/s pushed + pulled "
      "(%lld shard steps in all)\n",
      ps_total.steps / ps_total.seconds, ps_total.gb_per_s(bytes_per_step),
      static_cast<long long>(global_steps));
  std::printf("grpc echo:        %.1f worker steps/s, %.3f GB/s echoed\n",
              echo_total.steps / echo_total.seconds,
              echo_total.gb_per_s(bytes_per_step));
  std::printf(
      "ratio_vs_grpc_echo=%.3f\n",
      ps_total.gb_per_s(bytes_per_step) / echo_total.gb_per_s(bytes_per_step));
  return absl::OkStatus();
}

}  // namespace
}  // namespace ps
}  // namespace psgd

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<psgd::ps::Mode> mode =
      psgd::ps::ParseMode(absl::GetFlag(FLAGS_mode));
  const int shards = absl::GetFlag(FLAGS_shards);
  const int workers = absl::GetFlag(FLAGS_workers);
  if (!mode.ok() || shards < 1 || workers < 1) {
    std::fprintf(stderr, "ps_bench: bad --mode, --shards or --workers\n");
    return 2;
  }
  if (absl::Status s = psgd::ps::Run(*mode, shards, workers); !s.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
