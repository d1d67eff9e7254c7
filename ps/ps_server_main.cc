// ps_server: one parameter-server shard as a process.
//
//   ps_server --listen_address=0.0.0.0:2222 --shard_index=0 --num_shards=2
//       --cluster_name=cifar --mode=sync --replicas_to_aggregate=3
//       --total_num_replicas=4
//
// Serves until a Shutdown RPC (training is over) or SIGINT / SIGTERM, then
// stops cleanly (waiting pulls end, calls in flight get 5 s) and exits 0.
// Exits 2 for bad flags, 1 when it cannot start.
#include <csignal>
#include <cstdio>
#include <ctime>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "ps/grpc_server.h"
#include "ps/server_flags.h"

namespace {

// SIGINT and SIGTERM, blocked in every thread (they inherit the mask) and
// taken by the main thread with sigtimedwait.
sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Serves one parameter-server shard over gRPC until a Shutdown RPC, "
      "SIGINT or SIGTERM.");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<psgd::ps::ServerOptions> options =
      psgd::ps::ServerOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "ps_server: %s\n",
                 options.status().ToString().c_str());
    return 2;
  }
  if (absl::Status s =
          psgd::InitLoggingFromFlags(absl::StrCat("ps:", options->shard_index));
      !s.ok()) {
    std::fprintf(stderr, "ps_server: %s\n", s.ToString().c_str());
    return 2;
  }

  // Before any thread starts, so that gRPC's threads inherit the mask.
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = psgd::ps::PsGrpcServer::Start(*options);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  spdlog::info("shard {} of {} of cluster '{}' ({} mode) listening on {}",
               options->shard_index, options->num_shards, options->cluster_name,
               std::string(psgd::ps::ModeName(options->mode)),
               (*server)->address());

  std::string reason;
  while (reason.empty()) {
    const timespec tick = {0, 100 * 1000 * 1000};
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal > 0) {
      reason = signal == SIGINT ? "SIGINT" : "SIGTERM";
    } else if ((*server)->WaitForShutdown(absl::Now())) {
      reason = "a Shutdown RPC";
    }
  }
  spdlog::info("stopping on {}", reason);
  (*server)->Stop(absl::Seconds(5));
  const psgd::ps::ShardStatus status = (*server)->shard()->Status();
  spdlog::info(
      "stopped at step {}: {} applied, {} aggregated, {} stale, {} "
      "surplus, {} refused",
      status.step, status.counters.applied, status.counters.aggregated,
      status.counters.dropped_stale, status.counters.dropped_surplus,
      status.counters.refused);
  return 0;
}
