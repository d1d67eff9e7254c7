// The sharded client's own logic, the same for every transport: which shards
// a call reaches (skipping kNoPush, parts only to the shards that hold
// them), the first error naming its shard, generation agreement, and many
// threads on one client. The shards are in process (InProcessShardChannel),
// each behind a channel that wraps it, counts its calls and can fail them,
// as leveldb's tests wrap an Env.
#include "ps/client/sharded_client.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "ps/testing/in_process_client.h"
#include "ps/testing/ps_client_test_util.h"

namespace psgd {
namespace ps {
namespace {

// Wraps a channel: counts pushes, commits and pulls, fails every call with
// `fail` when set, and adds `generation_offset` to the generation pulls report.
class WrappedChannel final : public ShardChannel {
 public:
  explicit WrappedChannel(std::unique_ptr<ShardChannel> inner)
      : inner_(std::move(inner)) {}

  std::atomic<int> pushes{0};
  std::atomic<int> commits{0};
  std::atomic<int> decide_pushes{0};  // of `pushes`, DecidePush calls
  std::atomic<int> pulls{0};
  absl::Status fail;  // set before the calls
  // Health calls answered UNAVAILABLE before the shard's own answer (a
  // server that is not up yet); health calls made.
  std::atomic<int> unreachable_health_calls{0};
  std::atomic<int> health_calls{0};
  int64_t generation_offset = 0;

  const std::string& name() const override { return inner_->name(); }
  std::unique_ptr<ShardCall> Initialize(
      const wire::InitializeRequest& r, absl::Time d,
      wire::InitializeResponse* out) override {
    return Maybe([&] { return inner_->Initialize(r, d, out); });
  }
  std::unique_ptr<ShardCall> Join(const wire::JoinRequest& r, absl::Time d,
                                  wire::MembershipResponse* out) override {
    return Maybe([&] { return inner_->Join(r, d, out); });
  }
  std::unique_ptr<ShardCall> Leave(const wire::LeaveRequest& r, absl::Time d,
                                   wire::MembershipResponse* out) override {
    return Maybe([&] { return inner_->Leave(r, d, out); });
  }
  std::unique_ptr<ShardCall> Status(const wire::StatusRequest& r, absl::Time d,
                                    wire::StatusResponse* out) override {
    return Maybe([&] { return inner_->Status(r, d, out); });
  }
  std::unique_ptr<ShardCall> Shutdown(const wire::ShutdownRequest& r,
                                      absl::Time d,
                                      wire::ShutdownResponse* out) override {
    return Maybe([&] { return inner_->Shutdown(r, d, out); });
  }
  std::unique_ptr<ShardCall> Rollback(const wire::RollbackRequest& r,
                                      absl::Time d,
                                      wire::RollbackResponse* out) override {
    return Maybe([&] { return inner_->Rollback(r, d, out); });
  }
  std::unique_ptr<ShardCall> Checkpoint(
      const wire::CheckpointRequest& r, absl::Time d,
      wire::CheckpointResponse* out) override {
    return Maybe([&] { return inner_->Checkpoint(r, d, out); });
  }
  std::unique_ptr<ShardCall> LeaseData(const wire::LeaseDataRequest& r,
                                       absl::Time d,
                                       wire::LeaseDataResponse* out) override {
    return Maybe([&] { return inner_->LeaseData(r, d, out); });
  }
  std::unique_ptr<ShardCall> Health(absl::Time d, bool* serving) override {
    ++health_calls;
    if (unreachable_health_calls > 0) {
      --unreachable_health_calls;
      return FinishedCall(absl::UnavailableError("connection refused"));
    }
    return Maybe([&] { return inner_->Health(d, serving); });
  }
  std::unique_ptr<ShardExchange> NewExchange() override {
    return std::make_unique<Exchange>(this, inner_->NewExchange());
  }

 private:
  class Exchange final : public ShardExchange {
   public:
    Exchange(WrappedChannel* channel, std::unique_ptr<ShardExchange> inner)
        : channel_(channel), inner_(std::move(inner)) {}
    void StartPush(const wire::PushRequest& header,
                   absl::Span<const TensorBytes> gradients,
                   std::shared_ptr<const void> in_use, absl::Time deadline,
                   PushMethod method) override {
      ++channel_->pushes;
      if (method == PushMethod::kDecidePush) ++channel_->decide_pushes;
      inner_->StartPush(header, gradients, std::move(in_use), deadline, method);
    }
    void StartPull(const wire::PullRequest& request,
                   absl::Time deadline) override {
      ++channel_->pulls;
      inner_->StartPull(request, deadline);
    }
    void StartCommit(const wire::CommitRequest& request,
                     absl::Time deadline) override {
      ++channel_->commits;
      inner_->StartCommit(request, deadline);
    }
    absl::Status Await() override {
      absl::Status s = inner_->Await();
      return channel_->fail.ok() ? s : channel_->fail;
    }
    void Cancel() override { inner_->Cancel(); }
    absl::Status ReadPush(wire::PushResponse* response) override {
      return inner_->ReadPush(response);
    }
    absl::Status ReadPull(PulledVersion* version,
                          ShardAssembler* assembler) override {
      absl::Status s = inner_->ReadPull(version, assembler);
      version->generation += channel_->generation_offset;
      return s;
    }

   private:
    WrappedChannel* const channel_;
    const std::unique_ptr<ShardExchange> inner_;
  };

  template <typename Start>
  std::unique_ptr<ShardCall> Maybe(Start start) {
    if (!fail.ok()) return FinishedCall(fail);
    return start();
  }

  const std::unique_ptr<ShardChannel> inner_;
};

// Two shards of the scenario model: "w" is split over both, "b" and "v" sit
// on one each.
struct Cluster {
  Cluster() {
    for (int i = 0; i < 2; ++i) {
      ShardOptions o;
      o.shard_index = i;
      o.num_shards = 2;
      o.cluster_name = "c";
      auto shard = ParameterShard::Create(o);
      REQUIRE(shard.ok());
      shards.push_back(*std::move(shard));
    }
    LinkShardsInProcess({shards[0].get(), shards[1].get()});
    auto p = PlaceVariables(testing::ScenarioModel(), 2,
                            testing::kScenarioSplitThreshold);
    REQUIRE(p.ok());
    placement = *p;
  }
  // A client over wrapped channels (kept in `channels`).
  std::unique_ptr<ShardedPsClient> Client(int worker) {
    std::vector<std::unique_ptr<ShardChannel>> owned;
    channels.clear();
    for (int i = 0; i < 2; ++i) {
      auto c = std::make_unique<WrappedChannel>(
          std::make_unique<InProcessShardChannel>(i, shards[i].get()));
      channels.push_back(c.get());
      owned.push_back(std::move(c));
    }
    ShardedClientOptions o;
    o.cluster = "c";
    o.worker_id = worker;
    auto client = ShardedPsClient::Create(placement, std::move(owned), o);
    REQUIRE(client.ok());
    return *std::move(client);
  }
  // The shard that holds variable `name` whole.
  int ShardOf(const std::string& name) const {
    return placement.slices[placement.slice_index.at(name)].shard;
  }

  std::vector<std::unique_ptr<ParameterShard>> shards;
  Placement placement;
  std::vector<WrappedChannel*> channels;  // the last client's
};

using Values = testing::ScenarioValues;

TEST_CASE("sharded: a channel for each shard of the placement") {
  Cluster cluster;
  std::vector<std::unique_ptr<ShardChannel>> one;
  one.push_back(
      std::make_unique<InProcessShardChannel>(0, cluster.shards[0].get()));
  auto client = ShardedPsClient::Create(cluster.placement, std::move(one),
                                        ShardedClientOptions());
  CHECK(client.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(client.status().message() ==
        "sharded client: 1 shards for a placement over 2");
}

TEST_CASE(
    "sharded: the servers' variables, slices put back together, also "
    "before the chief's Initialize (none) ") {
  Cluster cluster;
  auto client = cluster.Client(0);
  auto none = client->Variables();
  REQUIRE(none.ok());
  CHECK(none->empty());
  Values init;
  REQUIRE(cluster.Client(-1)->Initialize(init.Const()).ok());
  auto variables = client->Variables();
  INFO(variables.status().ToString());
  REQUIRE(variables.ok());
  const std::vector<VariableSpec> model = testing::ScenarioModel();
  REQUIRE(variables->size() == model.size());
  for (const VariableSpec& v : model) {
    bool found = false;
    for (const VariableSpec& got : *variables) {
      if (got.name == v.name) {
        found = true;
        CHECK(got.shape == v.shape);
      }
    }
    CHECK(found);
  }
}

TEST_CASE("sharded: shards with nothing to push or pull are not called") {
  Cluster cluster;
  Values init;
  REQUIRE(cluster.Client(-1)->Initialize(init.Const()).ok());
  auto client = cluster.Client(0);
  REQUIRE(client->Join().ok());

  // With several shards a whole push goes to every shard: one naming a
  // shard kNoPush is refused before anything is sent.
  auto refused = client->Push(ModelVersion{{0, kNoPush}}, init.Const());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(cluster.channels[0]->pushes == 0);
  CHECK(cluster.channels[1]->pushes == 0);
  // Staged on shard 1, then decided by shard 0 in the call that carries
  // its gradients (DecidePush): no commit call.
  auto pushed = client->Push(ModelVersion{{0, 0}}, init.Const());
  REQUIRE(pushed.ok());
  CHECK(cluster.channels[0]->pushes == 1);
  CHECK(cluster.channels[0]->decide_pushes == 1);
  CHECK(cluster.channels[1]->pushes == 1);
  CHECK(cluster.channels[1]->decide_pushes == 0);
  CHECK(cluster.channels[0]->commits == 0);
  CHECK(cluster.channels[1]->commits == 0);
  CHECK(pushed->shards[0].outcome == PushOutcome::kApplied);
  CHECK(pushed->shards[1].outcome == PushOutcome::kApplied);
  REQUIRE(cluster.shards[0]->AwaitDecisionsDelivered(absl::Now() +
                                                     absl::Seconds(30)));

  // A part with "b" only reaches the shard that holds "b", push and pull.
  const int b_shard = cluster.ShardOf("b");
  const int other = 1 - b_shard;
  // (Step 0 is complete on both shards: one replica to aggregate.)
  ModelVersion next{{1, 1}};
  next.push_id = NewPushId();
  auto part =
      client->PushPart(next, {{"b", ConstTensorView(init.b.data(), {8})}});
  REQUIRE(part.ok());
  CHECK(!part->shards[b_shard].skipped);
  CHECK(part->shards[other].skipped);
  CHECK(cluster.channels[b_shard]->pushes == 2);
  CHECK(cluster.channels[other]->pushes == 1);
  CHECK(cluster.channels[0]->commits == 0);  // a part is not committed
  std::vector<float> b(8);
  auto pulled = client->PullPart(ModelVersion::AtLeast(2, 0),
                                 absl::Now() + absl::Seconds(30),
                                 {{"b", TensorView(b.data(), {8})}});
  REQUIRE(pulled.ok());
  CHECK(pulled->steps[other] == kNoPush);
  CHECK(pulled->steps[b_shard] == cluster.shards[b_shard]->Status().step);
  CHECK(cluster.channels[b_shard]->pulls == 1);
  CHECK(cluster.channels[other]->pulls == 0);

  // A whole pull asks both.
  Values got;
  REQUIRE(client
              ->Pull(ModelVersion::AtLeast(2, 0),
                     absl::Now() + absl::Seconds(30), got.Mutable())
              .ok());
  CHECK(cluster.channels[0]->pulls + cluster.channels[1]->pulls == 3);
}

TEST_CASE(
    "sharded: the first error names its shard; shard 0 decides nothing "
    "unstaged") {
  Cluster cluster;
  Values init;
  REQUIRE(cluster.Client(-1)->Initialize(init.Const()).ok());
  auto client = cluster.Client(0);
  cluster.channels[1]->fail = absl::UnavailableError("link down");
  absl::Status joined = client->Join();
  CHECK(joined.code() == absl::StatusCode::kUnavailable);
  CHECK(joined.message() == "join to shard 1: link down");
  // Shard 0 was called all the same.
  CHECK(cluster.shards[0]->Status().live_workers == std::vector<int>{0});

  absl::Status pushed =
      client->Push(ModelVersion::AtLeast(2, 0), init.Const()).status();
  CHECK(pushed.message() == "push to shard 1: link down");
  // Not staged on shard 1: shard 0 is not asked to decide it.
  CHECK(cluster.channels[0]->pushes == 0);
  CHECK(cluster.shards[0]->Status().step == 0);

  cluster.channels[0]->fail = absl::DeadlineExceededError("slow");
  Values got;
  absl::Status pulled =
      client
          ->Pull(ModelVersion::AtLeast(2, 0), absl::Now() + absl::Seconds(30),
                 got.Mutable())
          .status();
  CHECK(pulled.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(pulled.message() == "pull to shard 0: slow");
}

TEST_CASE("sharded: shards answering from two generations abort the pull") {
  Cluster cluster;
  Values init;
  REQUIRE(cluster.Client(-1)->Initialize(init.Const()).ok());
  auto client = cluster.Client(-1);
  cluster.channels[1]->generation_offset = 1;
  Values got;
  auto pulled = client->Pull(ModelVersion::AtLeast(2, 0),
                             absl::Now() + absl::Seconds(30), got.Mutable());
  CHECK(pulled.status().code() == absl::StatusCode::kAborted);
  cluster.channels[1]->generation_offset = 0;
  pulled = client->Pull(ModelVersion::AtLeast(2, 0),
                        absl::Now() + absl::Seconds(30), got.Mutable());
  REQUIRE(pulled.ok());
  CHECK(pulled->generation == 1);
}

TEST_CASE("sharded: one client, calls from several threads at once") {
  for (int threads : {2, 6}) {
    Cluster cluster;
    Values init;
    REQUIRE(cluster.Client(-1)->Initialize(init.Const()).ok());
    auto client = cluster.Client(-1);
    std::vector<std::thread> running;
    std::atomic<int> failures{0};
    for (int t = 0; t < threads; ++t) {
      running.emplace_back([&, t] {
        Values got;
        for (int k = 0; k < 50; ++k) {
          bool ok = (t % 2 == 0) ? client
                                       ->Pull(ModelVersion::AtLeast(2, 0),
                                              absl::Now() + absl::Seconds(30),
                                              got.Mutable())
                                       .ok()
                                 : client->Status().ok();
          if (!ok || got.w != init.w) ++failures;
        }
      });
    }
    for (std::thread& t : running) t.join();
    CHECK(failures == 0);
  }
}

TEST_CASE("sharded: AwaitServing asks until every shard serves") {
  Cluster cluster;
  std::unique_ptr<ShardedPsClient> client = cluster.Client(0);
  SECTION("shards that cannot be reached yet are asked again") {
    cluster.channels[1]->unreachable_health_calls = 3;
    REQUIRE(client->AwaitServing(absl::Now() + absl::Seconds(60)).ok());
    CHECK(cluster.channels[1]->health_calls == 4);
    // A shard is not asked again once it serves.
    CHECK(cluster.channels[0]->health_calls == 1);
  }
  SECTION("the shards that do not serve by the deadline are named") {
    cluster.channels[1]->fail = absl::UnavailableError("connection refused");
    absl::Status s =
        client->AwaitServing(absl::Now() + absl::Milliseconds(300));
    CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
    CHECK(s.message() ==
          "parameter servers not serving: shard 1 (UNAVAILABLE: connection "
          "refused)");
    CHECK(cluster.channels[1]->health_calls >= 1);
  }
  SECTION("a shard that has shut down does not serve") {
    cluster.shards[0]->Shutdown("over");
    absl::Status s =
        client->AwaitServing(absl::Now() + absl::Milliseconds(300));
    CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
    CHECK(s.message() ==
          "parameter servers not serving: shard 0 (not serving yet)");
  }
}

}  // namespace
}  // namespace ps
}  // namespace psgd
