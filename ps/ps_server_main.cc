// ps_server: one parameter-server shard as a process.
//
//   ps_server --config=configs/sync_2ps_4workers.pbtxt --task=ps:0
//   ps_server --listen_address=0.0.0.0:2222 --shard_index=0 --num_shards=2
//       --cluster_name=cifar --mode=sync --replicas_to_aggregate=3
//       --total_num_replicas=4
//
// Serves until a Shutdown RPC (training is over) or SIGINT / SIGTERM, then
// stops cleanly (waiting pulls end, calls in flight get 5 s) and exits 0.
// Exits 2 for bad flags or config, 1 when it cannot start (its port in use,
// an address that does not resolve, the listener failing).
//
// This file only reads the flags (ps/server/server_flags.h) and waits for
// the signal: the server library does the rest. PsGrpcServer serves the
// shard and owns its lifecycle (ps/server/server_lifecycle.h), which
// expires the leases of silent workers, logs checkpoint failures, rollbacks
// and slow steps, serves the Prometheus page and, once it knows the run
// directory (--run_dir, or the one the chief sends with Initialize), writes
// ps-I.jsonl there (a "server" line every 2 s; a restarted server appends)
// and ps-I.summary.json when it stops.
//
// With a checkpoint directory in the config it restores the newest complete
// checkpoint at start (and logs each newer one it refused, with the file and
// the reason), saves checkpoints while it serves and its final state when it
// stops (docs/RELIABILITY.md).
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_flags.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/mutex_tuning.h"
#include "ps/server/grpc_server.h"
#include "ps/server/server_flags.h"

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

// Raises the soft limit on open descriptors to the hard limit (at most
// the kernel's fs.nr_open): every connection to the UCX listener and to the
// Prometheus page holds one, and a soft limit of 1,024 let 1,500 connections
// that never sent a byte take every descriptor, so that the server answered
// no Status and no scrape (docs/RELIABILITY.md, Security 60-6).
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  rlim_t target = limit.rlim_max;
  rlim_t nr_open = 0;
  if (std::ifstream in("/proc/sys/fs/nr_open"); in >> nr_open && nr_open > 0) {
    if (target == RLIM_INFINITY || target > nr_open) target = nr_open;
  }
  if (target <= limit.rlim_cur) {
    spdlog::info("open descriptors: soft limit {} (hard {})", limit.rlim_cur,
                 limit.rlim_max);
    return;
  }
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("open descriptors: cannot raise the soft limit {} to {}",
                 before, target);
    return;
  }
  spdlog::info(
      "open descriptors: soft limit raised from {} to {} (the hard "
      "limit)",
      before, target);
}

// The base name of argv[0] ("ps_server" when there is none).
std::string ProgramName(const char* argv0) {
  std::string name = argv0 == nullptr ? "" : argv0;
  const size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  return name.empty() ? "ps_server" : name;
}

}  // namespace

int main(int argc, char** argv) {
  psgd::SetProgramUsage(
      "Serves one parameter-server shard over gRPC until a Shutdown RPC, "
      "SIGINT or SIGTERM.");
  // Before any thread: a push's buffers reused from step to step, not
  // fresh pages each time (common/malloc_tuning.h).
  const std::string malloc_tuning = psgd::TuneMallocForTensors();
  // absl's deadlock detection off (common/mutex_tuning.h).
  const std::string mutex_tuning = psgd::TuneMutexesForServing();
  absl::ParseCommandLine(argc, argv);
  // The name it runs under in its errors: ps_server from Bazel, psgd-ps
  // from the wheel.
  const std::string me = ProgramName(argv[0]);
  if (psgd::PrintClusterRequested()) {
    absl::StatusOr<psgd::ResolvedCluster> cluster =
        psgd::ps::ResolvedClusterFromFlags();
    if (!cluster.ok()) {
      std::fprintf(stderr, "%s: %s\n", me.c_str(),
                   std::string(cluster.status().message()).c_str());
      return 2;
    }
    std::fputs(psgd::PrintResolvedCluster(*cluster).c_str(), stdout);
    return 0;
  }
  absl::StatusOr<psgd::ps::LifecycleOptions> lifecycle =
      psgd::ps::LifecycleOptionsFromFlags();
  if (!lifecycle.ok()) {
    std::fprintf(stderr, "%s: %s\n", me.c_str(),
                 std::string(lifecycle.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<psgd::ps::ServerOptions> options =
      psgd::ps::ServerOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "%s: %s\n", me.c_str(),
                 options.status().ToString().c_str());
    // A port in use (UNAVAILABLE) is a server that cannot start, not a bad
    // config.
    return absl::IsUnavailable(options.status()) ? 1 : 2;
  }
  if (absl::Status s = psgd::InitLoggingFromFlags(
          absl::StrCat("ps:", options->shard.shard_index));
      !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", me.c_str(), s.ToString().c_str());
    return 2;
  }

  spdlog::info("{}", malloc_tuning);
  spdlog::info("{}", mutex_tuning);
  RaiseFileLimit();

  // Before any thread starts, so that gRPC's threads inherit the mask.
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = psgd::ps::PsGrpcServer::Start(*options, *lifecycle);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
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
  (*server)->Stop(absl::Seconds(5), reason);
  return 0;
}
