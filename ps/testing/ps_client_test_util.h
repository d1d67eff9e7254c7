// A concurrency scenario run through any PsClient: W worker threads push
// and pull for K steps each against the shards, then the test checks that
// the final step is exact and that each shard's weights equal a sequential
// replay of the gradients it accepted. The in-process client runs it under
// ThreadSanitizer, the gRPC client over loopback.
#ifndef PSGD_PS_TESTING_PS_CLIENT_TEST_UTIL_H_
#define PSGD_PS_TESTING_PS_CLIENT_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <vector>

#include "common/model_variables.h"
#include "ps/state/options.h"
#include "ps/client/ps_client.h"

namespace psgd {
namespace ps {
namespace testing {

// Variables small enough for hundreds of steps under sanitizers; "w" is
// above kSplitThreshold and is cut in two.
std::vector<VariableSpec> ScenarioModel();
constexpr int64_t kScenarioSplitThreshold = 1024;

struct Scenario {
  Mode mode = Mode::kSync;
  int workers = 8;
  int steps = 200;  // pushes per worker
  // Async: the blocking staleness bound (-1: none).
  int64_t staleness_bound = -1;
  int replicas_to_aggregate = 8;
  bool scale_lr_by_staleness = false;
  // Overlap: push in parts (one per variable, the last first) and pull one
  // variable per thread, all at once (PsClient::PushPart, PullPart).
  bool parts = false;
};

// Sync with N = M = workers (lockstep), sync with backup workers (N < M),
// async.
Scenario SyncScenario(int workers, int steps);
Scenario BackupScenario(int workers, int replicas_to_aggregate, int steps);
Scenario AsyncScenario(int workers, int steps, bool scale_lr_by_staleness);

// Options of shard `shard_index` of `num_shards` for the scenario.
ServerOptions ScenarioOptions(const Scenario& scenario, int shard_index,
                              int num_shards);

using ClientFactory = std::function<std::unique_ptr<PsClient>(int worker_id)>;

// Runs the scenario with a client per worker from make_client(worker) and a
// chief client make_client(-1) that initialises, and checks the outcome
// with Catch2 (on the calling thread).
void RunScenario(const Scenario& scenario, const ClientFactory& make_client);

}  // namespace testing
}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_TESTING_PS_CLIENT_TEST_UTIL_H_
