#include "worker/session/session_config.h"

#include "absl/strings/str_cat.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {

absl::StatusOr<SessionTaskConfig> SessionTaskFromConfig(
    const ClusterConfig& config, int index) {
  if (index < 0 || index >= MaxWorkers(config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker:", index, " is not in cluster '", config.name(),
                     "' (", MaxWorkers(config), " workers)"));
  }
  const config::TrainingConfig& training = config.training();
  SessionTaskConfig s;
  s.stragglers = StragglerEmulator::ForWorker(config, index);
  s.session.worker_id = index;
  s.session.sync = training.mode() == config::TrainingConfig::SYNC;
  s.session.ps_unavailable_timeout =
      absl::Seconds(config.ps_unavailable_timeout_seconds());
  s.session.overlap = config.wire().overlap();
  s.session.data_from_servers =
      config.data().sharding() == config::DataConfig::SERVERS;
  s.session.allowed_failures =
      training.total_num_replicas() - (training.has_min_workers()
                                           ? training.min_workers()
                                           : training.total_num_replicas());
  s.chief = index == 0;
  s.chief_options.eval_every = training.eval_every();
  if (config.has_checkpoint()) {
    s.chief_options.checkpoint_every =
        absl::Seconds(config.checkpoint().every_seconds());
    s.chief_options.final_checkpoint = true;
  }
  s.max_steps = training.has_steps() ? training.steps() : 0;
  s.max_time = absl::Seconds(training.max_seconds());
  s.eval_examples = training.eval_examples();

  for (const config::PsTask& ps : config.ps()) {
    s.client.addresses.push_back(ps.address());
  }
  s.client.cluster = config.name();
  s.client.worker_id = index;
  s.client.security = SecurityFromConfig(config);
  const ps::WireDTypes wire = ps::WireDTypesFromConfig(config);
  s.client.wire = wire;
  s.client.shared_memory = config.wire().shared_memory();
  s.client.ucx = config.wire().data_plane() == config::WireConfig::UCX;
  s.client.ucx_transports = config.wire().ucx_transports();
  return s;
}

}  // namespace psgd
