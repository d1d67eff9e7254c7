// The RPC side of per-host checkpoints (ps/checkpoint/agreement.h decides):
// a starting ps_server whose checkpoint directory is its own asks every
// other ps task for the checkpoints complete in its directory
// (ListCheckpoints), retrying those that do not answer yet (restarting too,
// or not started), and restores the newest one that every shard has.
//
// Thread-safety: one call per shard, from the thread that starts the server.
#ifndef PSGD_PS_SERVER_CHECKPOINT_AGREEMENT_H_
#define PSGD_PS_SERVER_CHECKPOINT_AGREEMENT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/server/server_options.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

// For an agreeing shard (ParameterShard::agreeing) started with `options`
// (its server's): asks the other shards at options.ps_addresses, with
// options.security, decides, and calls RestoreAgreed.
// Returns the label restored (-1: none, the shard starts empty).
// DEADLINE_EXCEEDED naming the shards that did not answer by `deadline`
// (and the last error of each); another shard's refusal (another cluster,
// a wrong token) as it came, naming that shard.
absl::StatusOr<int64_t> AgreeAndRestore(ParameterShard* shard,
                                        const ServerOptions& options,
                                        absl::Time deadline);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_CHECKPOINT_AGREEMENT_H_
