// ps_bench: parameter-server throughput against a bare gRPC echo of the
// same bytes, in one process on loopback.
//
//   bazel run -c opt //ps:ps_bench -- --shards=2 --workers=4 --seconds=10
//
// Phase 1: S ps shard servers (PsGrpcServer) hold the TF cifar10 tutorial
// model (1,068,298 float32 parameters) placed over them; W worker threads,
// each with its own GrpcPsClient (own connections), loop pull -> push of a
// synthetic gradient (no compute) as a worker does: sync waits for the next
// step, async takes the newest weights.
// Phase 2: S echo servers; W threads, each with its own channels, echo each
// shard's bytes to its echo server in parallel: the same bytes up (push)
// and down (pull) per step, with nothing of the parameter server.
// Both phases run `--seconds` after `--warmup_seconds`. The last line is
// ratio_vs_grpc_echo=<ps GB/s / echo GB/s>.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/model_variables.h"
#include "proto/echo.grpc.pb.h"
#include "ps/grpc_client.h"
#include "ps/grpc_server.h"

ABSL_FLAG(int, shards, 2, "Parameter-server shards S.");
ABSL_FLAG(int, workers, 4, "Worker threads W.");
ABSL_FLAG(double, seconds, 10, "Measured seconds per phase.");
ABSL_FLAG(double, warmup_seconds, 1, "Unmeasured seconds before each phase.");
ABSL_FLAG(std::string, mode, "sync", "sync (N = M = W) or async.");
ABSL_FLAG(int64_t, split_threshold_bytes, int64_t{1} << 20,
          "Split threshold of the placement.");

namespace psgd {
namespace ps {
namespace {

constexpr int64_t kMaxMessageBytes = int64_t{256} << 20;

struct Tally {
  int64_t steps = 0;
  double seconds = 0;
  double gb_per_s(int64_t bytes_per_step) const {
    return steps * static_cast<double>(bytes_per_step) / seconds / 1e9;
  }
};

// Runs body() on W threads until the phase ends: warmup, then measured
// time; returns the steps completed in the measured window.
class Phase {
 public:
  Phase(absl::Duration warmup, absl::Duration measured)
      : start_(absl::Now() + warmup), end_(start_ + measured) {}
  bool Running() const { return absl::Now() < end_; }
  // Counts one step if it ended inside the measured window.
  void Count() {
    if (absl::Now() >= start_) ++steps_;
  }
  Tally Result() const {
    return {steps_.load(), absl::ToDoubleSeconds(end_ - start_)};
  }

 private:
  const absl::Time start_, end_;
  std::atomic<int64_t> steps_{0};
};

std::vector<NamedConstTensorView> ConstViews(
    const std::vector<VariableSpec>& specs, const std::vector<Tensor>& t) {
  std::vector<NamedConstTensorView> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    out.push_back({specs[i].name, t[i].view()});
  }
  return out;
}

std::vector<NamedTensorView> Views(const std::vector<VariableSpec>& specs,
                                   std::vector<Tensor>& t) {
  std::vector<NamedTensorView> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    out.push_back({specs[i].name, t[i].view()});
  }
  return out;
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

absl::StatusOr<std::unique_ptr<GrpcPsClient>> Client(
    const std::vector<std::string>& addresses, int worker,
    const std::vector<VariableSpec>& specs) {
  GrpcClientOptions o;
  o.addresses = addresses;
  o.cluster = "bench";
  o.worker_id = worker;
  o.variables = specs;
  o.split_threshold_bytes = absl::GetFlag(FLAGS_split_threshold_bytes);
  o.max_message_bytes = kMaxMessageBytes;
  return GrpcPsClient::Create(o);
}

absl::StatusOr<Tally> RunParameterServer(Mode mode, int shards, int workers,
                                         absl::Duration warmup,
                                         absl::Duration measured,
                                         int64_t* global_steps) {
  const std::vector<VariableSpec> specs = Cifar10TutorialVariables();
  std::vector<std::unique_ptr<PsGrpcServer>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < shards; ++i) {
    ServerOptions o;
    o.shard_index = i;
    o.num_shards = shards;
    o.cluster_name = "bench";
    o.mode = mode;
    o.total_num_replicas = workers;
    o.replicas_to_aggregate = mode == Mode::kSync ? workers : 1;
    o.max_message_bytes = kMaxMessageBytes;
    o.split_threshold_bytes = absl::GetFlag(FLAGS_split_threshold_bytes);
    absl::StatusOr<std::unique_ptr<PsGrpcServer>> s = PsGrpcServer::Start(o);
    if (!s.ok()) return s.status();
    addresses.push_back((*s)->address());
    servers.push_back(*std::move(s));
  }
  absl::StatusOr<std::unique_ptr<GrpcPsClient>> chief =
      Client(addresses, -1, specs);
  if (!chief.ok()) return chief.status();
  const std::vector<Tensor> initial = Filled(specs, 0.01f);
  if (absl::Status s = (*chief)->Initialize(ConstViews(specs, initial));
      !s.ok()) {
    return s;
  }
  std::vector<std::unique_ptr<GrpcPsClient>> clients;
  for (int w = 0; w < workers; ++w) {
    absl::StatusOr<std::unique_ptr<GrpcPsClient>> c =
        Client(addresses, w, specs);
    if (!c.ok()) return c.status();
    if (absl::Status s = (*c)->Join(); !s.ok()) return s;
    clients.push_back(*std::move(c));
  }

  Phase phase(warmup, measured);
  std::vector<absl::Status> errors(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      GrpcPsClient& client = *clients[w];
      std::vector<Tensor> weights = Filled(specs, 0);
      const std::vector<Tensor> grads = Filled(specs, 1e-3f * (w + 1));
      const absl::Duration wait = absl::Seconds(60);
      absl::StatusOr<ModelVersion> v =
          client.Pull(ModelVersion::AtLeast(shards, 0), absl::Now() + wait,
                      Views(specs, weights));
      while (v.ok() && phase.Running()) {
        absl::StatusOr<PushResult> r =
            client.Push(*v, ConstViews(specs, grads));
        if (!r.ok()) {
          v = r.status();
          break;
        }
        v = client.Pull(
            mode == Mode::kSync ? v->Next() : ModelVersion::AtLeast(shards, 0),
            absl::Now() + wait, Views(specs, weights));
        phase.Count();
      }
      // Leaving lets the others' last sync steps complete without us.
      absl::Status left = client.Leave();
      errors[w] = v.ok() ? left : v.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  absl::StatusOr<std::vector<ShardStatus>> status = (*chief)->Status();
  if (!status.ok()) return status.status();
  *global_steps = (*status)[0].step;
  return phase.Result();
}

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

absl::StatusOr<Tally> RunEcho(const std::vector<int64_t>& shard_bytes,
                              int workers, absl::Duration warmup,
                              absl::Duration measured) {
  const int shards = static_cast<int>(shard_bytes.size());
  EchoService service;
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<int> ports(shards);
  std::vector<std::string> addresses;
  for (int i = 0; i < shards; ++i) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &ports[i]);
    builder.RegisterService(&service);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    servers.push_back(builder.BuildAndStart());
    if (servers.back() == nullptr || ports[i] == 0) {
      return absl::UnavailableError("echo server did not start");
    }
    addresses.push_back("127.0.0.1:" + std::to_string(ports[i]));
  }
  Phase phase(warmup, measured);
  std::vector<absl::Status> errors(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<std::unique_ptr<echo::Echo::Stub>> stubs;
      std::vector<echo::EchoMessage> requests(shards), replies(shards);
      for (int i = 0; i < shards; ++i) {
        stubs.push_back(echo::Echo::NewStub(
            CreatePsChannel(addresses[i], kMaxMessageBytes)));
        requests[i].set_payload(std::string(shard_bytes[i], 'x'));
      }
      while (phase.Running() && errors[w].ok()) {
        errors[w] = CallInParallel(
            addresses, "echo", absl::Now() + absl::Seconds(60),
            [&](int i, grpc::ClientContext* ctx, auto done) {
              stubs[i]->async()->Echo(ctx, &requests[i], &replies[i],
                                      std::move(done));
            });
        phase.Count();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (auto& s : servers) s->Shutdown();
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  return phase.Result();
}

int Main() {
  const int shards = absl::GetFlag(FLAGS_shards);
  const int workers = absl::GetFlag(FLAGS_workers);
  absl::StatusOr<Mode> mode = ParseMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok() || shards < 1 || workers < 1) {
    std::fprintf(stderr, "ps_bench: bad --mode, --shards or --workers\n");
    return 2;
  }
  const absl::Duration warmup =
      absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds));
  const absl::Duration measured = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  const std::vector<VariableSpec> specs = Cifar10TutorialVariables();
  absl::StatusOr<Placement> placement =
      PlaceVariables(specs, shards, absl::GetFlag(FLAGS_split_threshold_bytes));
  if (!placement.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n",
                 placement.status().ToString().c_str());
    return 2;
  }
  const int64_t model_bytes = TotalParameters(specs) * 4;
  const int64_t bytes_per_step = 2 * model_bytes;  // push up + pull down
  std::printf(
      "ps_bench: cifar10 tutorial model, %lld float32 parameters (%.2f MB), "
      "%d shards, %d workers, %s, %.0f s per phase after %.0f s warmup, "
      "loopback, servers and workers in one process\n",
      static_cast<long long>(TotalParameters(specs)), model_bytes / 1e6, shards,
      workers,
      *mode == Mode::kSync ? absl::StrFormat("sync N=M=%d", workers).c_str()
                           : "async",
      absl::ToDoubleSeconds(measured), absl::ToDoubleSeconds(warmup));
  for (int i = 0; i < shards; ++i) {
    std::printf("  shard %d: %lld bytes in %zu slices\n", i,
                static_cast<long long>(placement->shard_bytes[i]),
                placement->shard_slices[i].size());
  }
  std::fflush(stdout);

  int64_t global_steps = 0;
  absl::StatusOr<Tally> ps = RunParameterServer(*mode, shards, workers, warmup,
                                                measured, &global_steps);
  if (!ps.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", ps.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "parameter server: %.1f worker steps/s (%lld shard-0 steps in all), "
      "%.3f GB/s pushed + pulled\n",
      ps->steps / ps->seconds, static_cast<long long>(global_steps),
      ps->gb_per_s(bytes_per_step));
  std::fflush(stdout);
  absl::StatusOr<Tally> echo =
      RunEcho(placement->shard_bytes, workers, warmup, measured);
  if (!echo.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", echo.status().ToString().c_str());
    return 1;
  }
  std::printf("grpc echo:        %.1f worker steps/s, %.3f GB/s echoed\n",
              echo->steps / echo->seconds, echo->gb_per_s(bytes_per_step));
  std::printf("ratio_vs_grpc_echo=%.3f\n",
              ps->gb_per_s(bytes_per_step) / echo->gb_per_s(bytes_per_step));
  return 0;
}

}  // namespace
}  // namespace ps
}  // namespace psgd

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psgd::ps::Main();
}
