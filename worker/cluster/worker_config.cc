#include "worker/cluster/worker_config.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "worker/models/registry.h"
#include "worker/session/session_config.h"

namespace psgd {

absl::StatusOr<WorkerTaskConfig> WorkerTaskFromConfig(
    const ClusterConfig& config, int index) {
  ASSIGN_OR_RETURN(SessionTaskConfig session,
                   SessionTaskFromConfig(config, index));
  const config::WorkerTask& task = WorkerTaskOf(config, index);
  const config::TrainingConfig& training = config.training();
  const config::DataConfig& data = config.data();
  WorkerTaskConfig w;

  w.backend = task.device();
  w.backend_options.threads = task.threads();
  w.model = config.model().name();
  // The servers exempt these from weight decay: each must be the model's.
  const config::OptimizerConfig& opt = config.training().optimizer();
  if (opt.no_weight_decay_size() > 0) {
    ASSIGN_OR_RETURN(const std::vector<VariableSpec> variables,
                     ModelVariables(w.model));
    if (const absl::optional<std::string> name = FirstUnknownVariable(
            {opt.no_weight_decay().begin(), opt.no_weight_decay().end()},
            variables)) {
      return absl::InvalidArgumentError(
          absl::StrCat("training.optimizer.no_weight_decay: '", *name,
                       "' is not a variable of model ", w.model));
    }
  }

  w.data.name =
      data.source() == config::DataConfig::CIFAR10 ? "cifar10" : "synthetic";
  w.data.data_dir = data.dir();
  w.data.synthetic_train = data.synthetic_train_size();
  w.data.synthetic_test = data.synthetic_test_size();
  w.data.synthetic_seed = training.seed();

  w.batches.batch_size = training.batch_size();
  // With a step budget the data repeats until the budget is spent.
  w.batches.epochs = training.has_epochs() ? training.epochs() : 0;
  w.batches.seed = training.seed();
  w.batches.worker_index = index;
  w.batches.num_workers = MaxWorkers(config);
  switch (data.sharding()) {
    case config::DataConfig::SHARD:
      w.batches.partition = BatcherOptions::Partition::kShard;
      break;
    case config::DataConfig::OWN_ORDER:
      w.batches.partition = BatcherOptions::Partition::kOwnOrder;
      break;
    case config::DataConfig::SERVERS:
      w.batches.partition = BatcherOptions::Partition::kServers;
      break;
  }
  w.batches.augment = data.augment();

  static_cast<SessionOptions&>(w.loop) = session.session;
  static_cast<ChiefOptions&>(w.loop) = session.chief_options;
  w.loop.chief = session.chief;
  w.loop.max_steps = session.max_steps;
  w.loop.max_time = session.max_time;
  w.loop.eval_examples = session.eval_examples;
  w.loop.seed = training.seed();
  w.loop.stragglers = std::move(session.stragglers);
  w.loop.emulated = config.has_emulation();

  w.client = std::move(session.client);
  if (w.model == kExternalModel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker:", index, ": model \"", kExternalModel,
        "\" comes from the worker program: start this task with Python "
        "(python/psgd, docs/PYTHON.md)"));
  }
  ASSIGN_OR_RETURN(w.client.variables, ModelVariables(w.model));
  // Batch norm's running statistics: variables of the servers too, unless
  // the workers keep them (docs/CLUSTER.md, "Batch norm").
  ASSIGN_OR_RETURN(const std::vector<VariableSpec> state, ModelState(w.model));
  if (config.model().has_batch_norm_statistics() && state.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.batch_norm_statistics is set (",
                     config::ModelConfig::BatchNormStatistics_Name(
                         config.model().batch_norm_statistics()),
                     "), but model ", w.model, " has no batch norm"));
  }
  w.loop.statistics_on_servers =
      config.model().batch_norm_statistics() != config::ModelConfig::LOCAL;
  if (w.loop.statistics_on_servers) {
    w.client.variables.insert(w.client.variables.end(), state.begin(),
                              state.end());
  }
  return w;
}

}  // namespace psgd
