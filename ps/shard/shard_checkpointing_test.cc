// ShardCheckpointing with a fake core: when it saves, what it refuses, and
// the restore and rollback it records. The shard's own state in a
// checkpoint is tested through ParameterShard (shard_checkpoint_test.cc).
#include "ps/shard/shard_checkpointing.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ps/testing/checkpoint_test_util.h"

namespace psgd {
namespace ps {
namespace {

// The state of testing::SmallCheckpoint at `step`, and what the room asked.
class FakeCore : public ShardCheckpointing::Core {
 public:
  bool has_variables = true;
  int64_t step = 0;
  absl::Status install_status;
  std::vector<int64_t> installed_steps;
  std::vector<bool> installed_restart;
  std::vector<int64_t> generations;

  bool HasVariablesLocked() const override { return has_variables; }
  void SaveStateLocked(ShardCheckpoint* c) override {
    const ShardCheckpoint state = testing::SmallCheckpoint(0, 1, 0, step);
    c->generation = generations.empty() ? 1 : generations.back();
    c->step = step;
    c->weights = state.weights;
    c->optimizer = state.optimizer;
    c->last_push_step = state.last_push_step;
    c->live_workers = state.live_workers;
    c->counters = state.counters;
  }
  absl::Status InstallStateLocked(const ShardCheckpoint& c, bool restart,
                                  int64_t generation) override {
    if (!install_status.ok()) return install_status;
    installed_steps.push_back(c.step);
    installed_restart.push_back(restart);
    step = c.step;
    return absl::OkStatus();
  }
  void EnterGenerationLocked(int64_t generation) override {
    generations.push_back(generation);
  }
  uint32_t DigestLocked() const override { return 1000 + step; }
};

ShardOptions Options(const std::string& dir) {
  ShardOptions o;
  o.cluster_name = "c";
  o.mode = Mode::kSync;
  o.total_num_replicas = 3;
  o.checkpoint.dir = dir;
  o.checkpoint.keep = 10;
  return o;
}

// The room of `options`, opened (its directory made, nothing restored).
std::unique_ptr<ShardCheckpointing> Opened(const ShardOptions& options,
                                           FakeCore& core) {
  auto room = std::make_unique<ShardCheckpointing>(options, "shard 0");
  absl::StatusOr<std::unique_ptr<CheckpointStore>> store =
      ShardCheckpointing::OpenStore(options);
  REQUIRE(store.ok());
  REQUIRE(room->Open(*std::move(store), core).ok());
  return room;
}

std::vector<int64_t> CompleteLabels(ShardCheckpointing& room) {
  std::vector<int64_t> labels;
  for (const CompleteCheckpointInfo& c : room.store()->ListComplete()) {
    labels.push_back(c.label);
  }
  return labels;
}

TEST_CASE("every_steps and requested labels are saved once each") {
  ShardOptions options = Options(testing::FreshDir("cadence"));
  options.checkpoint.every_steps = 2;
  FakeCore core;
  auto room = Opened(options, core);
  CHECK(room->report().label == -1);
  CHECK_FALSE(room->awaiting_rollback());

  room->Save(0, core);
  REQUIRE(room->Request(3, /*now=*/false, /*step=*/0, core).ok());
  // The writer keeps at most kMaxQueued saves waiting: one at a time here.
  for (core.step = 1; core.step <= 4; ++core.step) {
    room->writer()->Flush();
    room->MaybeSave(core.step, core);
  }
  // Label 5 at step 4, now: saved at once.
  core.step = 4;
  REQUIRE(room->Request(5, /*now=*/true, core.step, core).ok());
  room->writer()->Flush();
  CHECK(room->writer()->stats().written == 5);  // 0, 2, 3, 4, 5
  CHECK(CompleteLabels(*room) == std::vector<int64_t>{5, 4, 3, 2, 0});

  // At shutdown only an unsaved step is saved.
  room->SaveUnsaved(4, core);
  core.step = 6;
  room->SaveUnsaved(6, core);
  room->writer()->Flush();
  CHECK(room->writer()->stats().written == 6);
}

TEST_CASE("requests and rollbacks are refused with the shard's messages") {
  FakeCore core;
  ShardCheckpointing none(Options(""), "shard 0");
  absl::Status s = none.Request(1, false, 0, core);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message() ==
        "shard 0: checkpoint requested, but the server has no checkpoint "
        "directory");
  s = none.CheckRollback(1, 2, "ctx: ");
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message() == "ctx: the server has no checkpoint directory");
  s = none.CheckRollback(1, 0, "ctx: ");
  CHECK(absl::IsInvalidArgument(s));
  CHECK(s.message() == "ctx: the generation must be >= 1 and the label >= 0");
  CHECK(absl::IsFailedPrecondition(none.CheckAgreeing()));

  auto room = Opened(Options(testing::FreshDir("refused")), core);
  core.has_variables = false;
  s = room->Request(1, false, 0, core);
  CHECK(s.message() == "shard 0: checkpoint requested before Initialize");
  core.has_variables = true;
  s = room->Request(-1, false, 0, core);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(s.message() == "shard 0: checkpoint label -1 is negative");
}

TEST_CASE("a restore awaits the rollback, which is recorded") {
  const ShardOptions options = Options(testing::FreshDir("restore"));
  FakeCore writer_core;
  {
    auto room = Opened(options, writer_core);
    writer_core.step = 3;
    room->Save(3, writer_core);
    writer_core.step = 5;
    room->Save(5, writer_core);
    room->writer()->Flush();
  }

  FakeCore core;
  auto room = Opened(options, core);
  CHECK(room->report().label == 5);
  CHECK(room->report().step == 5);
  CHECK(room->report().digest == 1005);  // the core's, once installed
  CHECK(core.installed_steps == std::vector<int64_t>{5});
  CHECK(core.installed_restart == std::vector<bool>{true});
  CHECK(core.generations == std::vector<int64_t>{1});
  CHECK(room->awaiting_rollback());
  CHECK(room->AwaitsRollbackTo(5));
  CHECK_FALSE(room->AwaitsRollbackTo(3));
  // Nothing is saved while the shard awaits the rollback.
  room->Save(6, core);
  room->writer()->Flush();
  CHECK(room->writer()->stats().written == 0);

  // The rollback to checkpoint 3 in generation 2, from step 5.
  absl::StatusOr<ShardCheckpoint> c = room->store()->Read(3);
  REQUIRE(c.ok());
  REQUIRE(room->RollBackTo(*c, 3, 2, /*from=*/5, "ctx: ", core).ok());
  CHECK(core.installed_restart == std::vector<bool>{true, false});
  CHECK(core.generations == std::vector<int64_t>{1, 2});
  CHECK_FALSE(room->awaiting_rollback());
  ShardStatus status;
  room->AddStatus(&status);
  CHECK(status.rollbacks == std::vector<RollbackRecord>{{2, 3, 5, 3}});
  room->writer()->Flush();
  CHECK(CompleteLabels(*room) == std::vector<int64_t>{3});

  // A checkpoint of another cluster changes nothing.
  ShardCheckpoint other = *c;
  other.cluster = "d";
  const absl::Status s = room->RollBackTo(other, 3, 3, 3, "ctx: ", core);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message() ==
        "ctx: the checkpoint is of shard 0 of 1 of cluster 'd' (sync, 3 "
        "workers); this is shard 0 of 1 of 'c' (sync, 3 workers)");
  CHECK(core.generations == std::vector<int64_t>{1, 2});
}

}  // namespace
}  // namespace ps
}  // namespace psgd
