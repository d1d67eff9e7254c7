#include "ps/testing/checkpoint_test_util.h"

#include <algorithm>
#include <filesystem>

namespace psgd {
namespace ps {
namespace testing {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return dir;
}

ShardCheckpoint SmallCheckpoint(int shard, int num_shards, int64_t label,
                                int64_t step, int64_t generation) {
  ShardCheckpoint c;
  c.cluster = "c";
  c.shard_index = shard;
  c.num_shards = num_shards;
  c.label = label;
  c.generation = generation;
  c.mode = Mode::kSync;
  c.total_num_replicas = 3;
  c.saved = absl::FromUnixSeconds(1700000000);
  c.step = step;
  auto layout = std::make_shared<VariableLayout>();
  auto weights = std::make_shared<WeightsSnapshot>();
  const std::vector<std::pair<std::string, Shape>> vars = {{"w", {2, 3}},
                                                           {"b", {2}}};
  for (const auto& [name, shape] : vars) {
    const absl::Status added =
        layout->Add(name, shape, VariableKind::kParameter);
    (void)added;  // distinct names
    Tensor t(shape);
    for (int64_t i = 0; i < t.size(); ++i) {
      t.data()[i] = 0.5f * static_cast<float>(i) + step + 10 * shard;
    }
    weights->weights.push_back(std::move(t));
  }
  weights->step = step;
  weights->generation = generation;
  weights->layout = layout;
  c.weights = weights;
  c.optimizer.kind = OptimizerOptions::Kind::kAdam;
  c.optimizer.step = step;
  c.optimizer.slot_names = {"m", "v"};
  c.optimizer.slots = {
      {{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {1.0f, 2.0f}},
      {{1e-3f, 2e-3f, 3e-3f, 4e-3f, 5e-3f, 6e-3f}, {1e-4f, 2e-4f}}};
  c.last_push_step = {std::max<int64_t>(-1, step - 1),
                      std::max<int64_t>(-1, step - 2), -1};
  c.live_workers = {0, 1};
  c.counters.aggregated = 4;
  c.counters.applied = step;
  c.counters.dropped_surplus = 1;
  c.staleness_histogram = {{0, 3}, {2, 1}};
  c.workers_expired = 1;
  c.rollbacks = {{2, 4, 7, 4}};
  return c;
}

}  // namespace testing
}  // namespace ps
}  // namespace psgd
