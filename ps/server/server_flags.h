// The command-line flags of ps_server and what they fill: ServerOptions
// (ps/server/server_options.h, the shard's options in them), either from
// the option flags or from a cluster config:
//
//   ps_server --config=configs/sync_2ps_4workers.pbtxt --task=ps:1
//
// With --config the option flags (--listen_address, --mode, ...) are
// refused: the config says it all (--port_file, --run_dir and --log_level
// still apply).
//
// Thread-safety: call after absl::ParseCommandLine, from one thread.
#ifndef PSGD_PS_SERVER_SERVER_FLAGS_H_
#define PSGD_PS_SERVER_SERVER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/cluster_env.h"
#include "ps/server/server_lifecycle.h"
#include "ps/server/server_options.h"

namespace psgd {
namespace ps {

// The options the flags give, validated (ValidateServerOptions);
// INVALID_ARGUMENT naming the flag and its value otherwise. With --config:
// the config's errors (NOT_FOUND for a missing file, INVALID_ARGUMENT
// naming file, line and field), a --task that is not one of its ps tasks,
// or an option flag given beside it.
absl::StatusOr<ServerOptions> ServerOptionsFromFlags();

// The task and cluster of --config with --task or --cluster_from
// (common/cluster_flags.h); INVALID_ARGUMENT for a worker's task.
absl::StatusOr<ResolvedCluster> ResolvedClusterFromFlags();

// The lifecycle's options: --run_dir (where the server writes ps-I.jsonl;
// empty when not given, then the chief's choice arrives with Initialize)
// and --slow_step_seconds, validated (ValidateLifecycleOptions);
// INVALID_ARGUMENT naming the flag and its value otherwise.
absl::StatusOr<LifecycleOptions> LifecycleOptionsFromFlags();

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_SERVER_FLAGS_H_
