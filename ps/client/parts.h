// What a caller of PsClient::PushPart and PullPart (overlap) makes of the
// replies of several parts: the push's reply per shard and the version that
// pulls of groups of variables make up. Shared by the cluster worker
// (worker/session/overlap.h) and the client tests.
//
// Thread-safety: pure functions.
#ifndef PSGD_PS_CLIENT_PARTS_H_
#define PSGD_PS_CLIENT_PARTS_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/client/ps_client.h"

namespace psgd {
namespace ps {

// A push result with every shard `skipped`, for MergePartReplies.
PushResult NoReplies(int num_shards);
// Takes from `part` each shard's reply that decided its push (neither
// skipped nor staged) into `merged`.
void MergePartReplies(const PushResult& part, PushResult* merged);

// The version that pulls of parts make up: each shard's step from the parts
// that asked it, the generation, the longest server wait. FAILED_PRECONDITION
// when two parts found one shard at different steps, or different
// generations (it moved between them: pull again whole); INTERNAL when no
// part asked a shard.
absl::StatusOr<ModelVersion> MergePartVersions(
    absl::Span<const ModelVersion> parts, int num_shards);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_PARTS_H_
