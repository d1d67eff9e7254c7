// ps_cluster_bench: worker threads against the running ps_server tasks of
// a cluster config (started by hand or by scripts/bench/ps_bench_cluster.sh,
// possibly on other hosts), with the config's model, wire dtypes, mode and
// token: bytes per second per worker and per server. (ps_bench compares the
// parameter server with gRPC and TCP echoes in one process.)
//
//   bazel-bin/worker/bench/ps_cluster_bench --config=F --workers=4
//   [--first_worker=J]
//
// W worker threads (ids --first_worker.. of the config's workers, each with
// its own connections) loop push -> pull of a synthetic gradient (ps_load.h)
// for --seconds after --warmup_seconds. Until 2026-11-26 this was
// `ps_bench --config=F`.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
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
#include "common/cluster_config.h"
#include "common/malloc_tuning.h"
#include "common/metrics.h"
#include "common/model_variables.h"
#include "common/mutex_tuning.h"
#include "common/status_macros.h"
#include "ps/client/remote_client.h"
#include "ps/server/grpc_server.h"
#include "ps/wire/wire_dtype.h"
#include "worker/bench/ps_load.h"
#include "worker/models/registry.h"

ABSL_FLAG(std::string, config, "", "The cluster config (required).");
ABSL_FLAG(int, workers, 4, "Worker threads W.");
ABSL_FLAG(int, first_worker, 0, "The worker id of the first worker thread.");
ABSL_FLAG(double, seconds, 10, "Measured seconds.");
ABSL_FLAG(double, warmup_seconds, 1, "Unmeasured seconds first.");
ABSL_FLAG(int64_t, split_threshold_bytes, int64_t{1} << 20,
          "Split threshold of the placement (the servers' own).");
ABSL_FLAG(std::string, model, "",
          "Refused unless it is the config's model (the config decides).");

namespace psgd {
namespace ps {
namespace {

// --config: worker threads against the config's running ps tasks.
absl::Status RunAgainstConfig(const std::string& path, int workers) {
  ASSIGN_OR_RETURN(ClusterConfig config, LoadClusterConfig(path));
  RemoteClientOptions o;
  for (const config::PsTask& t : config.ps())
    o.addresses.push_back(t.address());
  o.cluster = config.name();
  o.security = SecurityFromConfig(config);
  const WireDTypes wire = WireDTypesFromConfig(config);
  o.wire = wire;
  o.shared_memory = config.wire().shared_memory();
  o.ucx = config.wire().data_plane() == config::WireConfig::UCX;
  o.ucx_transports = config.wire().ucx_transports();
  const Mode mode = config.training().mode() == config::TrainingConfig::SYNC
                        ? Mode::kSync
                        : Mode::kAsync;
  const int first = absl::GetFlag(FLAGS_first_worker);
  const std::string model = config.model().name();
  const std::string flag_model = absl::GetFlag(FLAGS_model);
  if (!flag_model.empty() && flag_model != model) {
    return absl::InvalidArgumentError(absl::StrCat("--model=", flag_model,
                                                   " but the config (", path,
                                                   ") trains model ", model));
  }
  ASSIGN_OR_RETURN(
      const std::vector<VariableSpec> specs,
      ServerVariables(model, config.model().batch_norm_statistics() ==
                                 config::ModelConfig::LOCAL));
  ParameterServerBench ps(specs);
  ps.set_split_threshold_bytes(absl::GetFlag(FLAGS_split_threshold_bytes));
  ps.set_mode(mode);
  ps.set_independent_workers();
  RETURN_IF_ERROR(ps.Connect(o, workers, first));
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::printf(
      "ps_cluster_bench --config=%s: model %s (%.2f MB), %zu ps tasks, workers "
      "%d..%d, %s, gradients %s, weights %s; %.1f s after %.1f s warmup\n",
      path.c_str(), model.c_str(), TotalParameters(specs) * 4 / 1e6,
      o.addresses.size(), first, first + workers - 1,
      std::string(ModeName(mode)).c_str(),
      std::string(DTypeName(o.wire.gradients)).c_str(),
      std::string(DTypeName(o.wire.weights)).c_str(), seconds,
      absl::GetFlag(FLAGS_warmup_seconds));
  std::fflush(stdout);
  RETURN_IF_ERROR(
      ps.Round(absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds))).status());
  ASSIGN_OR_RETURN(Tally t, ps.Round(absl::Seconds(seconds)));
  RETURN_IF_ERROR(ps.LeaveAll());
  // Gradients up in the gradients' dtype, weights down in the weights'.
  ASSIGN_OR_RETURN(Placement placement,
                   PlaceVariables(specs, static_cast<int>(o.addresses.size()),
                                  absl::GetFlag(FLAGS_split_threshold_bytes)));
  int64_t step_bytes = 0;
  for (size_t i = 0; i < o.addresses.size(); ++i) {
    const int64_t elements = placement.shard_bytes[i] / 4;
    const int64_t bytes =
        elements * (DTypeSize(o.wire.gradients) + DTypeSize(o.wire.weights));
    step_bytes += bytes;
    std::printf("server %zu (%s): %.1f MB/s pushed + pulled\n", i,
                o.addresses[i].c_str(), t.steps * bytes / t.seconds / 1e6);
  }
  std::printf("per worker: %.1f steps/s, %.1f MB/s\n",
              t.steps / t.seconds / workers,
              t.steps * step_bytes / t.seconds / workers / 1e6);
  std::printf("all workers: %.1f steps/s, %.1f MB/s\n", t.steps / t.seconds,
              t.steps * step_bytes / t.seconds / 1e6);
  return absl::OkStatus();
}

}  // namespace
}  // namespace ps
}  // namespace psgd

int main(int argc, char** argv) {
  // As a worker sets them (worker/worker_main.cc): with glibc's moving
  // thresholds the client fetches fresh pages for every step's tensors.
  const std::string malloc_tuning = psgd::TuneMallocForTensors();
  psgd::TuneMutexesForServing();  // as the worker (common/mutex_tuning.h)
  absl::ParseCommandLine(argc, argv);
  const int workers = absl::GetFlag(FLAGS_workers);
  if (absl::GetFlag(FLAGS_config).empty()) {
    std::fprintf(stderr, "ps_cluster_bench: --config is required\n");
    return 2;
  }
  if (workers < 1) {
    std::fprintf(stderr, "ps_cluster_bench: --workers must be >= 1\n");
    return 2;
  }
  std::printf("ps_cluster_bench: %s\n", malloc_tuning.c_str());
  absl::Status s =
      psgd::ps::RunAgainstConfig(absl::GetFlag(FLAGS_config), workers);
  if (!s.ok()) {
    std::fprintf(stderr, "ps_cluster_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
