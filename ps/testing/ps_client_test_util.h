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
#include "ps/client/ps_client.h"
#include "ps/state/options.h"

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
ShardOptions ScenarioOptions(const Scenario& scenario, int shard_index,
                             int num_shards);

using ClientFactory = std::function<std::unique_ptr<PsClient>(int worker_id)>;

// Runs the scenario with a client per worker from make_client(worker) and a
// chief client make_client(-1) that initialises, and checks the outcome
// with Catch2 (on the calling thread).
void RunScenario(const Scenario& scenario, const ClientFactory& make_client);

// The scenario model's variables, held by a test.
struct ScenarioValues {
  std::vector<float> w = std::vector<float>(64 * 8, 0.5f);
  std::vector<float> b = std::vector<float>(8, 0.25f);
  std::vector<float> v = std::vector<float>(16 * 4, -0.5f);
  std::vector<NamedConstTensorView> Const() const;
  std::vector<NamedTensorView> Mutable();
};

// Two workers push gradients that bfloat16 and float16 (with its power-of-
// two scale) carry exactly, for two steps, through clients from
// make_client over 2 shards of SyncScenario(2, 2) (the chief, -1,
// initialises); returns what worker 0 pulls.
ScenarioValues TwoWireSteps(const ClientFactory& make_client);

// InterruptPulls and ResumePulls with clients from make_client over 2 shards
// of SyncScenario(2, *) (the chief, -1, initialises): a pull that waits for
// its step ends CANCELLED when another thread interrupts, and no shard holds
// it any more; a pull that starts is refused; pushes and status go on;
// after ResumePulls a pull gets the step. Checks with Catch2.
void CheckInterruptedPulls(const ClientFactory& make_client);

// TwoWireSteps over a fresh cluster whose servers and clients use the wire
// dtypes given.
using WireRun =
    std::function<ScenarioValues(DType wire_gradients, DType wire_weights)>;
// Checks with Catch2 what `run` returns: with gradients exact in 16 bits
// the weights are float32's; bfloat16 weights are float32's rounded;
// float16 ones are within float16's relative precision.
void CheckWireDTypes(const WireRun& run);

}  // namespace testing
}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_TESTING_PS_CLIENT_TEST_UTIL_H_
