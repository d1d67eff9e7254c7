#include "worker/cluster/worker_config.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/wire/wire_dtype.h"
#include "worker/models/registry.h"

namespace psgd {

absl::StatusOr<WorkerTaskConfig> WorkerTaskFromConfig(
    const ClusterConfig& config, int index) {
  if (index < 0 || index >= config.worker_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker:", index, " is not in cluster '", config.name(),
                     "' (", config.worker_size(), " workers)"));
  }
  const config::WorkerTask& task = config.worker(index);
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
    for (const std::string& name : opt.no_weight_decay()) {
      bool found = false;
      for (const VariableSpec& v : variables) found |= v.name == name;
      if (!found) {
        return absl::InvalidArgumentError(absl::StrCat(
            "training.optimizer.no_weight_decay: '", name,
            "' is not a variable of model ", w.model));
      }
    }
  }

  w.data.name = data.source() == config::DataConfig::CIFAR10 ? "cifar10"
                                                             : "synthetic";
  w.data.data_dir = data.dir();
  w.data.synthetic_train = data.synthetic_train_size();
  w.data.synthetic_test = data.synthetic_test_size();
  w.data.synthetic_seed = training.seed();

  w.batches.batch_size = training.batch_size();
  // With a step budget the data repeats until the budget is spent.
  w.batches.epochs = training.has_epochs() ? training.epochs() : 0;
  w.batches.seed = training.seed();
  w.batches.worker_index = index;
  w.batches.num_workers = config.worker_size();
  w.batches.partition = data.sharding() == config::DataConfig::SHARD
                            ? BatcherOptions::Partition::kShard
                            : BatcherOptions::Partition::kOwnOrder;
  w.batches.augment = data.augment();

  w.loop.worker_id = index;
  w.loop.chief = index == 0;
  w.loop.sync = training.mode() == config::TrainingConfig::SYNC;
  w.loop.max_steps = training.has_steps() ? training.steps() : 0;
  w.loop.max_time = absl::Seconds(training.max_seconds());
  w.loop.eval_every = training.eval_every();
  w.loop.eval_examples = training.eval_examples();
  w.loop.seed = training.seed();
  w.loop.ps_unavailable_timeout =
      absl::Seconds(config.ps_unavailable_timeout_seconds());
  w.loop.overlap = config.wire().overlap();
  if (config.has_checkpoint()) {
    w.loop.checkpoint_every = absl::Seconds(config.checkpoint().every_seconds());
    w.loop.final_checkpoint = true;
  }

  for (const config::PsTask& ps : config.ps()) {
    w.client.addresses.push_back(ps.address());
  }
  w.client.cluster = config.name();
  w.client.worker_id = index;
  w.client.security = SecurityFromConfig(config);
  const ps::WireDTypes wire = ps::WireDTypesFromConfig(config);
  w.client.wire_gradients = wire.gradients;
  w.client.wire_weights = wire.weights;
  ASSIGN_OR_RETURN(w.client.variables, ModelVariables(w.model));
  return w;
}

}  // namespace psgd
