#include "ps/checkpoint/agreement.h"

#include <map>
#include <utility>

namespace psgd {
namespace ps {

int64_t AgreeOnCheckpoint(
    const std::vector<std::vector<CompleteCheckpointInfo>>& per_shard) {
  if (per_shard.empty()) return -1;
  // (label, generation) -> how many shards have it.
  std::map<std::pair<int64_t, int64_t>, size_t> count;
  for (const std::vector<CompleteCheckpointInfo>& shard : per_shard) {
    std::map<std::pair<int64_t, int64_t>, bool> seen;  // once per shard
    for (const CompleteCheckpointInfo& c : shard) {
      if (!seen[{c.label, c.generation}]) ++count[{c.label, c.generation}];
      seen[{c.label, c.generation}] = true;
    }
  }
  int64_t best = -1;
  for (const auto& [key, n] : count) {
    if (n == per_shard.size() && key.first > best) best = key.first;
  }
  return best;
}

}  // namespace ps
}  // namespace psgd
