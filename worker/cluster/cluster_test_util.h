// A small cluster in one process for the worker loop's tests: in-process
// shards, one thread per worker running ClusterWorker over its own client,
// a synthetic data set. No sockets, so it runs under ThreadSanitizer. Hooks
// let a test wrap each worker's client (fault injection), change the
// workers' options and act while they train.
#ifndef PSGD_WORKER_CLUSTER_CLUSTER_TEST_UTIL_H_
#define PSGD_WORKER_CLUSTER_CLUSTER_TEST_UTIL_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/client/ps_client.h"
#include "ps/shard/shard.h"
#include "worker/cluster/cluster_worker.h"

namespace psgd {
namespace testing {

struct ClusterSetup {
  std::string model = "cifar10_tutorial";
  bool sync = true;
  int shards = 2;
  int workers = 3;
  int replicas_to_aggregate = 3;
  int64_t max_steps = 12;
  int64_t eval_every = 5;
  // Worker index whose data ends after one epoch (-1: none).
  int short_lived_worker = -1;
  // With a lease, a thread expires silent workers every 20 ms.
  absl::Duration worker_lease = absl::ZeroDuration();
  // Shards' checkpoints (empty: none).
  std::string checkpoint_dir;
  int64_t checkpoint_every_steps = 0;
  // Batch norm's running statistics on the workers (LOCAL) instead of the
  // servers.
  bool local_statistics = false;

  // Worker w's client: `inner` itself (the default) or a wrapper the test
  // owns, which must outlive RunCluster.
  std::function<ps::PsClient*(int worker, ps::PsClient* inner)> wrap;
  // Changes worker w's options.
  std::function<void(int worker, ClusterWorkerOptions*)> adjust;
  // Runs on the calling thread while the workers train.
  std::function<void(const std::vector<ps::ParameterShard*>& shards)> during;
};

struct WorkerRun {
  absl::StatusOr<ClusterWorkerResult> result =
      absl::UnknownError("did not run");
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
};

struct ClusterRun {
  std::vector<WorkerRun> workers;
  std::vector<ps::ShardStatus> final_status;
  // Every shard's final weights by name (slices as the shards name them).
  std::map<std::string, std::vector<float>> final_weights;
};

// Runs the cluster until every worker's Run() returns. Failures to set up
// are Catch2 REQUIREs on the calling thread.
ClusterRun RunCluster(const ClusterSetup& setup);

// The mean loss of steps [from, to).
double MeanLoss(const std::vector<StepRecord>& steps, size_t from, size_t to);

}  // namespace testing
}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_CLUSTER_TEST_UTIL_H_
