// What any worker program takes from the cluster config for its session
// with the servers, whatever computes its gradients (the C++ worker,
// worker/cluster/worker_config.h, or the Python one, python/): the
// session's and the chief's options, how long to train, and how to reach
// the servers. Plain conversions, tested without a network.
//
// Thread-safety: pure functions.
#ifndef PSGD_WORKER_SESSION_SESSION_CONFIG_H_
#define PSGD_WORKER_SESSION_SESSION_CONFIG_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cluster_config.h"
#include "ps/client/remote_client.h"
#include "worker/session/chief.h"
#include "worker/session/stragglers.h"
#include "worker/session/worker_session.h"

namespace psgd {

// model { name: "external" }: the model comes from the worker program (a
// Python worker, docs/PYTHON.md): the servers take the chief's variables
// and refuse a worker whose variables differ. The C++ worker refuses it.
inline constexpr absl::string_view kExternalModel = "external";

struct SessionTaskConfig {
  SessionOptions session;
  ChiefOptions chief_options;
  bool chief = false;  // worker:0
  // Stop once the global step reaches this; 0: when the data ends.
  int64_t max_steps = 0;
  // Each worker also stops this long after it started; zero: no limit.
  absl::Duration max_time = absl::ZeroDuration();
  int64_t eval_examples = 0;
  // Everything but `variables`, which come from the model.
  ps::RemoteClientOptions client;
  // The config's straggler emulation for this worker.
  StragglerEmulator stragglers;
};

// For task worker:`index` of a validated config (LoadClusterConfig).
// INVALID_ARGUMENT for an index the config lacks.
absl::StatusOr<SessionTaskConfig> SessionTaskFromConfig(
    const ClusterConfig& config, int index);

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_SESSION_CONFIG_H_
