// Batch norm's running statistics in a cluster worker (the model's state();
// docs/CLUSTER.md, "Batch norm"), in one of two places:
//
// - On the servers: the statistics are the session's variables after the
//   model's (the overlap's last group), initialised by the chief and
//   pulled with the weights; each push carries the step's batch
//   statistics; the chief evaluates with the pulled ones (the model's own
//   follow only this worker's batches).
// - On the worker (LOCAL): the model's own, saved to a file every
//   save_every local steps and at the end, and read back when the worker
//   starts again.
//
// A model without state has nothing in either place, and every call is a
// no-op.
//
// Thread-safety: none; used by the worker loop's thread.
#ifndef PSGD_WORKER_CLUSTER_WORKER_STATISTICS_H_
#define PSGD_WORKER_CLUSTER_WORKER_STATISTICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/model_variables.h"
#include "ps/client/ps_client.h"
#include "worker/models/model.h"

namespace psgd {

struct WorkerStatisticsOptions {
  bool on_servers = true;
  // LOCAL: where the statistics are saved (empty: never saved) and how
  // often (local steps; 0: only at the end).
  std::string local_file;
  int64_t save_every = 100;
  int worker_id = 0;
  uint64_t seed = 1;  // the initial values' (on the servers)
};

class WorkerStatistics {
 public:
  // `model` is not owned and must outlive this object.
  WorkerStatistics(Model* model, WorkerStatisticsOptions options);

  // Whether the statistics travel with the session (on the servers, for a
  // model that has them).
  bool on_servers() const { return on_servers_; }
  // How many session variables they add after the model's (0 when none).
  int session_variables() const;

  // Before the session starts. On the servers: appends the statistics to
  // the session's variables and pull buffers, with their initial values.
  // LOCAL: the model takes the saved statistics of a previous run, if any
  // (the file's errors: local_statistics.h).
  absl::Status Prepare(std::vector<VariableSpec>* variables,
                       std::vector<ps::NamedTensorView>* buffers);
  // The chief: the initial values to Initialize with, after the weights.
  void AppendInitial(std::vector<ps::NamedConstTensorView>* initial) const;

  // After a training step, on the servers: takes the step's batch
  // statistics from the model; then AppendPush adds them to a push (whole,
  // or with overlap StepOverlap::Finish's parts).
  absl::Status TakeBatch();
  void AppendPush(std::vector<ps::NamedConstTensorView>* push) const;

  // Before an evaluation: on the servers, the model takes the pulled
  // statistics.
  absl::Status BeforeEvaluation();

  // LOCAL: saves after every save_every-th local step, and at the end.
  absl::Status AfterStep(int64_t local_step);
  absl::Status Save();

 private:
  Model* const model_;  // Not owned.
  const WorkerStatisticsOptions options_;
  const bool on_servers_;
  NamedTensors pulled_;  // on the servers: the running statistics
  NamedTensors batch_;   // on the servers: the last step's batch statistics
};

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_WORKER_STATISTICS_H_
