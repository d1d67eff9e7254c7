// The load of the parameter-server benchmarks (ps_bench, ps_cluster_bench):
// a model's variables as a cluster's servers hold them (the registry's,
// without a backend), shard servers in this process or clients of running
// ones, and worker threads that loop push -> pull of a synthetic gradient
// (no compute) as a worker does: sync waits for the next step, async takes
// the newest weights. Rounds of a given length, their steps tallied.
//
// Thread-safety: ParameterServerBench runs its worker threads inside
// Round(); one thread calls it.
#ifndef PSGD_WORKER_BENCH_PS_LOAD_H_
#define PSGD_WORKER_BENCH_PS_LOAD_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/metrics.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "ps/client/remote_client.h"
#include "ps/server/grpc_server.h"
#include "ps/server/server_options.h"
#include "ps/wire/wire_dtype.h"
#include "worker/models/registry.h"

namespace psgd {
namespace ps {

inline constexpr int64_t kMaxMessageBytes = int64_t{256} << 20;
inline constexpr char kCluster[] = "bench";
inline constexpr char kBenchToken[] = "ps-bench-token";

// The variables a cluster of `model` places on its servers: the registry's
// (no backend: worker/models/registry.h), with the batch norm statistics
// unless `local_statistics`.
inline absl::StatusOr<std::vector<VariableSpec>> ServerVariables(
    const std::string& model, bool local_statistics) {
  ASSIGN_OR_RETURN(std::vector<VariableSpec> specs, ModelVariables(model));
  if (!local_statistics) {
    ASSIGN_OR_RETURN(const std::vector<VariableSpec> state, ModelState(model));
    specs.insert(specs.end(), state.begin(), state.end());
  }
  return specs;
}

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
// it completed, the last one ending after round_end. The round lasts until
// every thread is done: a step that straddles the end counts, with its time
// (a 146 MB model's step may be longer than a round). The first error wins.
inline absl::StatusOr<Tally> RunRound(
    int workers, absl::Duration length,
    const std::function<absl::StatusOr<int64_t>(int, absl::Time)>& body) {
  const absl::Time start = absl::Now();
  const absl::Time end = start + length;
  std::vector<absl::StatusOr<int64_t>> steps(workers, int64_t{0});
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] { steps[w] = body(w, end); });
  }
  for (std::thread& t : threads) t.join();
  Tally tally{0, absl::ToDoubleSeconds(absl::Now() - start)};
  for (const absl::StatusOr<int64_t>& s : steps) {
    if (!s.ok()) return s.status();
    tally.steps += *s;
  }
  return tally;
}

inline std::vector<Tensor> Filled(const std::vector<VariableSpec>& specs,
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
  explicit ParameterServerBench(std::vector<VariableSpec> specs)
      : specs_(std::move(specs)) {}

  // The placement's split threshold (the servers' and the clients').
  void set_split_threshold_bytes(int64_t bytes) {
    split_threshold_bytes_ = bytes;
  }

  // Pushes and pulls over UCX on `transports` (the config's wire {
  // data_plane: UCX ucx_transports }), servers and clients; before Start.
  void set_ucx(std::string transports) {
    ucx_ = true;
    ucx_transports_ = std::move(transports);
  }

  absl::Status Start(Mode mode, int shards, int workers, DType wire) {
    mode_ = mode;
    wire_ = wire;
    for (int i = 0; i < shards; ++i) {
      ServerOptions o;
      o.shard = OptionsOfShard(mode, i, shards, workers);
      o.wire = {wire, wire};
      // Every server requires a token: the bench pays for its check.
      o.security.token = kBenchToken;
      o.ucx = ucx_;
      o.ucx_transports = ucx_transports_;
      ASSIGN_OR_RETURN(std::unique_ptr<PsGrpcServer> server,
                       PsGrpcServer::Start(o));
      addresses_.push_back(server->address());
      servers_.push_back(std::move(server));
    }
    // Shard 0 sends its decisions to the others (docs/PS.md, "One decision
    // per push").
    RETURN_IF_ERROR(servers_[0]->ConnectPeers(addresses_));
    RemoteClientOptions o;
    o.addresses = addresses_;
    o.cluster = kCluster;
    o.security.token = kBenchToken;
    o.wire = {wire, wire};
    o.ucx = ucx_;
    o.ucx_transports = ucx_transports_;
    return Connect(o, workers, 0);
  }

  // Clients of running servers: a chief that initialises them (a no-op
  // when they are), and `workers` workers from worker id `first` on, which
  // join and start at the servers' current step.
  absl::Status Connect(RemoteClientOptions o, int workers, int first) {
    o.variables = specs_;
    o.split_threshold_bytes = split_threshold_bytes_;
    o.max_message_bytes = kMaxMessageBytes;
    addresses_ = o.addresses;
    return ConnectClients(
        [o](int worker) -> absl::StatusOr<std::unique_ptr<ShardedPsClient>> {
          RemoteClientOptions mine = o;
          mine.worker_id = worker;
          return RemotePsClient::Create(mine);
        },
        static_cast<int>(o.addresses.size()), workers, first);
  }

  // A client of shard servers reached some other way (e.g. in this
  // process, without a transport: ps_bench's floor), made by `make` for a
  // worker id (-1: the chief).
  using ClientFactory =
      std::function<absl::StatusOr<std::unique_ptr<ShardedPsClient>>(int)>;
  absl::Status ConnectClients(ClientFactory make, int shards, int workers,
                              int first) {
    make_client_ = std::move(make);
    ASSIGN_OR_RETURN(chief_, Client(-1));
    const std::vector<Tensor> initial = Filled(specs_, 0.01f);
    RETURN_IF_ERROR(chief_->Initialize(ConstViews(initial)));
    for (int w = 0; w < workers; ++w) {
      ASSIGN_OR_RETURN(std::unique_ptr<ShardedPsClient> c, Client(first + w));
      RETURN_IF_ERROR(c->Join());
      weights_.push_back(Filled(specs_, 0));
      grads_.push_back(Filled(specs_, 1e-3f * (w + 1)));
      ASSIGN_OR_RETURN(ModelVersion v, c->Pull(ModelVersion::AtLeast(shards, 0),
                                               absl::Now() + absl::Seconds(60),
                                               Views(weights_.back())));
      versions_.push_back(v);
      clients_.push_back(std::move(c));
    }
    return absl::OkStatus();
  }

  // The options of shard i of the bench's servers (those of Start, which
  // adds a token and the transports).
  ShardOptions OptionsOfShard(Mode mode, int i, int shards, int workers) const {
    ShardOptions o;
    o.shard_index = i;
    o.num_shards = shards;
    o.cluster_name = kCluster;
    o.mode = mode;
    o.total_num_replicas = workers;
    o.replicas_to_aggregate = mode == Mode::kSync ? workers : 1;
    o.max_message_bytes = kMaxMessageBytes;
    o.split_threshold_bytes = split_threshold_bytes_;
    return o;
  }

  // Bytes one worker step moves through shard i: its slices up as
  // gradients and down as weights, in the wire dtype.
  int64_t StepBytes(int shard) const {
    return chief_->placement().shard_bytes[shard] / 4 * 2 * DTypeSize(wire_);
  }
  int64_t StepBytes() const {
    int64_t n = 0;
    for (size_t i = 0; i < addresses_.size(); ++i) n += StepBytes(i);
    return n;
  }
  const std::vector<std::string>& addresses() const { return addresses_; }
  void set_mode_and_wire(Mode mode, DType wire) {
    mode_ = mode;
    wire_ = wire;
  }

  absl::StatusOr<Tally> Round(absl::Duration length) {
    // Sync: the first worker to see the round end picks the last step,
    // and every worker goes on to it, so that no worker is left waiting
    // for a push that would only come in the next round.
    std::atomic<int64_t> stop_step{std::numeric_limits<int64_t>::max()};
    return RunRound(static_cast<int>(clients_.size()), length,
                    [&](int w, absl::Time end) -> absl::StatusOr<int64_t> {
                      ModelVersion& v = versions_[w];
                      int64_t steps = 0;
                      for (;;) {
                        if (absl::Now() >= end) {
                          if (mode_ == Mode::kAsync || !coordinate_stop_) break;
                          int64_t want = v.steps[0] + 1,
                                  seen = stop_step.load();
                          while (want < seen &&
                                 !stop_step.compare_exchange_weak(seen, want)) {
                          }
                        }
                        if (mode_ == Mode::kSync && coordinate_stop_ &&
                            v.steps[0] >= stop_step.load()) {
                          break;
                        }
                        RETURN_IF_ERROR(WorkerStep(w));
                        if (absl::Now() < end) ++steps;
                      }
                      return steps;
                    });
  }

  // Each worker does `steps` more push + pull steps (sync: every worker
  // the same steps, so that none waits for a push that does not come).
  absl::Status Steps(int64_t steps) {
    std::vector<absl::Status> done(clients_.size());
    std::vector<std::thread> threads;
    for (size_t w = 0; w < clients_.size(); ++w) {
      threads.emplace_back([&, w] {
        for (int64_t i = 0; i < steps && done[w].ok(); ++i) {
          done[w] = WorkerStep(w);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& s : done) RETURN_IF_ERROR(s);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<ShardStatus>> Status() { return chief_->Status(); }

  void set_mode(Mode mode) { mode_ = mode; }
  // Against servers shared with other processes: each worker stops at the
  // end of the round and leaves (sync steps go on without it) instead of
  // all meeting at one last step.
  void set_independent_workers() { coordinate_stop_ = false; }
  absl::Status LeaveAll() {
    for (auto& c : clients_) RETURN_IF_ERROR(c->Leave());
    return absl::OkStatus();
  }

  // What the workers' clients sent over UCX, in bytes (0 without UCX, or
  // where it could not start).
  int64_t UcxBytesSent() const {
    int64_t sent = 0;
    for (const auto& c : clients_) {
      if (const auto* g = dynamic_cast<const RemotePsClient*>(c.get())) {
        sent += g->payload_bytes().ucx_sent;
      }
    }
    return sent;
  }

  absl::StatusOr<int64_t> Step() {
    ASSIGN_OR_RETURN(std::vector<ShardStatus> s, chief_->Status());
    return s[0].step;
  }

 private:
  int64_t split_threshold_bytes_ = int64_t{1} << 20;
  bool ucx_ = false;
  std::string ucx_transports_;
  // One step of worker w: its push, then the pull of the next weights
  // (sync: the next step; async: the newest).
  absl::Status WorkerStep(int w) {
    ModelVersion& v = versions_[w];
    RETURN_IF_ERROR(clients_[w]->Push(v, ConstViews(grads_[w])).status());
    ASSIGN_OR_RETURN(
        v, clients_[w]->Pull(
               mode_ == Mode::kSync
                   ? v.Next()
                   : ModelVersion::AtLeast(static_cast<int>(v.steps.size()), 0),
               absl::Now() + absl::Seconds(120), Views(weights_[w])));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<ShardedPsClient>> Client(int worker) {
    return make_client_(worker);
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

  const std::vector<VariableSpec> specs_;
  Mode mode_ = Mode::kSync;
  DType wire_ = DType::kFloat32;
  bool coordinate_stop_ = true;
  ClientFactory make_client_;
  std::vector<std::unique_ptr<PsGrpcServer>> servers_;
  std::vector<std::string> addresses_;
  std::unique_ptr<ShardedPsClient> chief_;
  std::vector<std::unique_ptr<ShardedPsClient>> clients_;
  std::vector<std::vector<Tensor>> weights_, grads_;
  std::vector<ModelVersion> versions_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_WORKER_BENCH_PS_LOAD_H_
