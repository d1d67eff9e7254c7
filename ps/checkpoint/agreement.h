// Which checkpoint a restarted parameter server restores when every ps task
// keeps its checkpoints in a directory of its own (no shared file system):
// the newest one that every shard has complete, in the same generation. The
// restarted server asks the others over RPC (ListCheckpoints;
// ps/server/checkpoint_agreement.h is the adapter) and decides with this
// plain function; it never reads another shard's files.
//
// Thread-safety: a pure function.
#ifndef PSGD_PS_CHECKPOINT_AGREEMENT_H_
#define PSGD_PS_CHECKPOINT_AGREEMENT_H_

#include <cstdint>
#include <vector>

#include "ps/checkpoint/checkpoint_store.h"

namespace psgd {
namespace ps {

// `per_shard[i]`: the checkpoints complete in shard i's directory (any
// order). The newest label that every shard has with one generation, or -1
// when there is none (the cluster starts empty). A label that shards have
// in different generations belongs to two histories (a rollback happened
// between) and does not count.
int64_t AgreeOnCheckpoint(
    const std::vector<std::vector<CompleteCheckpointInfo>>& per_shard);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CHECKPOINT_AGREEMENT_H_
