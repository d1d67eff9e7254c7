#include "ps/client/parts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {

PushResult NoReplies(int num_shards) {
  PushResult r;
  r.shards.resize(num_shards);
  for (PushReply& reply : r.shards) reply.skipped = true;
  return r;
}

void MergePartReplies(const PushResult& part, PushResult* merged) {
  for (size_t i = 0; i < part.shards.size() && i < merged->shards.size(); ++i) {
    const PushReply& reply = part.shards[i];
    if (!reply.skipped && !reply.staged) merged->shards[i] = reply;
  }
}

absl::StatusOr<ModelVersion> MergePartVersions(
    absl::Span<const ModelVersion> parts, int num_shards) {
  ModelVersion version = ModelVersion::AtLeast(num_shards, kNoPush);
  for (const ModelVersion& part : parts) {
    for (int i = 0; i < num_shards && i < static_cast<int>(part.steps.size());
         ++i) {
      if (part.steps[i] == kNoPush) continue;
      if (version.steps[i] != kNoPush && version.steps[i] != part.steps[i]) {
        return absl::FailedPreconditionError(absl::StrCat(
            "shard ", i, " answered pulls of parts from steps ",
            version.steps[i], " and ", part.steps[i], ": pull again"));
      }
      version.steps[i] = part.steps[i];
    }
    if (version.generation != 0 && version.generation != part.generation) {
      return absl::FailedPreconditionError(
          absl::StrCat("pulls of parts answered from generations ",
                       version.generation, " and ", part.generation));
    }
    version.generation = part.generation;
    version.server_wait = std::max(version.server_wait, part.server_wait);
    if (part.steps[0] != kNoPush) version.learning_rate = part.learning_rate;
  }
  for (int i = 0; i < num_shards; ++i) {
    if (version.steps[i] == kNoPush) {
      return absl::InternalError(
          absl::StrCat("no pull of a part asked shard ", i));
    }
  }
  return version;
}

}  // namespace ps
}  // namespace psgd
