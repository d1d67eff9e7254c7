// What a ps task takes from the cluster config (common/cluster_config.h):
// its ServerOptions (ps/server/server_options.h), the shard's options in
// them. A plain conversion; ps_server --config=F --task=ps:I uses it.
//
// Thread-safety: a pure function.
#ifndef PSGD_PS_SERVER_SERVER_CONFIG_H_
#define PSGD_PS_SERVER_SERVER_CONFIG_H_

#include "absl/status/statusor.h"
#include "common/cluster_config.h"
#include "ps/server/server_options.h"

namespace psgd {
namespace ps {

// The options of shard `index` of a validated config, validated
// (ValidateServerOptions). INVALID_ARGUMENT for an index the config lacks.
absl::StatusOr<ServerOptions> ServerOptionsFromConfig(
    const ClusterConfig& config, int index);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_SERVER_CONFIG_H_
