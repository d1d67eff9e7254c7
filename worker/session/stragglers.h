// Straggler emulation and emulated compute (docs/STRAGGLERS.md): the delays
// a config's `stragglers` and `emulation` inject into one worker's steps,
// drawn from a seed of training.seed and the worker's index, so that a run
// is repeatable and its workers differ. Plain draws, no sleeping: the worker
// loop (worker/session/task_run.h) waits them out and records them.
//
//   StragglerEmulator  per step, after the compute that took C:
//                      (slow_factor - 1) x C, a stall with its probability,
//                      an extra delay; before each push and after each pull,
//                      the transfer delay. Entries that name the worker (or
//                      all) add up.
//   ComputeTimes       emulated compute: a step's compute time from a
//                      distribution or a file of measured step times.
//
// Thread-safety: thread-compatible (each holds its random engine).
#ifndef PSGD_WORKER_SESSION_STRAGGLERS_H_
#define PSGD_WORKER_SESSION_STRAGGLERS_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/cluster.pb.h"

namespace psgd {

// One draw of `d` (zero for NONE). `d` is valid (LoadClusterConfig checks
// it: times >= 0 and finite, an exponential's mean and a Pareto's scale and
// alpha > 0). A Pareto draw is capped at a day.
absl::Duration DrawDelay(const config::DelayDistribution& d,
                         std::mt19937_64* engine);

// The random engine of worker `worker_index`'s emulation, seeded from the
// run's seed; `stream` tells the emulator's draws from emulated compute's.
std::mt19937_64 EmulationEngine(uint64_t seed, int worker_index, int stream);

// What one step had injected after its compute.
struct InjectedDelay {
  absl::Duration slow;   // (slow_factor - 1) x the compute time
  absl::Duration stall;  // 0 or stall_seconds
  absl::Duration extra;  // extra_delay's draw
  absl::Duration total() const { return slow + stall + extra; }
};

class StragglerEmulator {
 public:
  // Injects nothing.
  StragglerEmulator() = default;
  // The entries of `config.stragglers()` that name worker `worker_index`
  // (or every worker). `config` is validated (LoadClusterConfig).
  static StragglerEmulator ForWorker(const config::ClusterConfig& config,
                                     int worker_index);

  // Whether any entry applies to this worker.
  bool enabled() const { return !entries_.empty(); }
  // The delay after a compute that took `compute`. Every entry draws every
  // step (a stall's draw and the extra delay's), whatever the outcome, so
  // that a worker's sequence depends only on its seed and step count.
  InjectedDelay AfterCompute(absl::Duration compute);
  // Before each push and after each pull.
  absl::Duration transfer() const { return transfer_; }

 private:
  std::vector<config::StragglerConfig> entries_;
  absl::Duration transfer_ = absl::ZeroDuration();
  std::mt19937_64 engine_;
};

class ComputeTimes {
 public:
  // From `emulation` (validated): its distribution, or the samples read
  // from its file (INVALID_ARGUMENT naming the file and line for one that
  // does not read as a number >= 0; NOT_FOUND for a missing file).
  static absl::StatusOr<ComputeTimes> Create(
      const config::EmulationConfig& emulation, uint64_t seed,
      int worker_index);

  absl::Duration Next();
  // "constant 55 ms", "samples of FILE (N)", ...: for the reports.
  const std::string& description() const { return description_; }

 private:
  config::DelayDistribution distribution_;
  std::vector<double> samples_;  // seconds; empty: the distribution
  std::string description_;
  std::mt19937_64 engine_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_STRAGGLERS_H_
