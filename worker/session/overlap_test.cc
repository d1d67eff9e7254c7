// The overlap helpers over in-process shards: the pull groups of the
// tutorial network (a layer's weights and bias), a push in parts whose
// replies are those of the parts that completed each shard's push, and
// group pulls that are awaited one by one and joined into one version.
#include "worker/session/overlap.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "common/model_variables.h"
#include "ps/shard/shard.h"
#include "ps/state/placement.h"
#include "ps/testing/in_process_client.h"

namespace psgd {
namespace {

TEST_CASE("pull groups: a variable and the small ones after it") {
  const std::vector<std::vector<int>> groups =
      PullGroups(Cifar10TutorialVariables());
  CHECK(groups ==
        std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}});
  CHECK(PullGroups({{"a", {2}, Initializer::Constant(0)},
                    {"b", {4096}, Initializer::Constant(0)}}) ==
        std::vector<std::vector<int>>{{0}, {1}});
}

struct Cluster {
  // Two shards, sync N = M = 1, variables "w" (split over both) and "b".
  Cluster() {
    specs = {{"w", {64, 8}, Initializer::Constant(0.5f)},
             {"b", {8}, Initializer::Constant(0.25f)}};
    auto p = ps::PlaceVariables(specs, 2, 1024);
    REQUIRE(p.ok());
    for (int i = 0; i < 2; ++i) {
      ps::ShardOptions o;
      o.shard_index = i;
      o.num_shards = 2;
      auto shard = ps::ParameterShard::Create(o);
      REQUIRE(shard.ok());
      shards.push_back(*std::move(shard));
    }
    std::vector<ps::ParameterShard*> raw = {shards[0].get(), shards[1].get()};
    auto c = ps::InProcessPsClient::Create(raw, *p, "psgd", 0);
    REQUIRE(c.ok());
    client = *std::move(c);
    for (float& x : w.span()) x = 0.5f;
    for (float& x : b.span()) x = 0.25f;
    std::vector<ps::NamedConstTensorView> init = {{"w", w.view()},
                                                  {"b", b.view()}};
    REQUIRE(client->Initialize(init).ok());
    REQUIRE(client->Join().ok());
  }
  std::vector<VariableSpec> specs;
  std::vector<std::unique_ptr<ps::ParameterShard>> shards;
  std::unique_ptr<ps::PsClient> client;
  Tensor w = Tensor({64, 8}), b = Tensor({8});
};

TEST_CASE("a push in parts: each shard's reply is its completing part's") {
  Cluster c;
  PartSender sender(c.client.get());
  Tensor gw({64, 8}), gb({8});
  for (float& x : gw.span()) x = 0.01f;
  for (float& x : gb.span()) x = -0.02f;
  sender.Begin(ps::ModelVersion::AtLeast(2, 0));
  sender.Add({"b", gb.view()});
  sender.Add({"w", gw.view()});
  absl::StatusOr<ps::PushResult> r = sender.Finish();
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  for (const ps::PushReply& reply : r->shards) {
    CHECK_FALSE(reply.skipped);
    CHECK_FALSE(reply.staged);
    CHECK(reply.outcome == ps::PushOutcome::kApplied);
    CHECK(reply.step == 1);
  }
  // A second push for the same step is refused: the error is the push's.
  sender.Begin(ps::ModelVersion::AtLeast(2, 0));
  sender.Add({"w", gw.view()});
  sender.Add({"b", gb.view()});
  CHECK(absl::IsFailedPrecondition(sender.Finish().status()));
}

TEST_CASE("group pulls are awaited one by one and make up one version") {
  Cluster c;
  GroupPuller puller(c.client.get(), {{0}, {1}});
  Tensor w({64, 8}), b({8});
  puller.Start(ps::ModelVersion::AtLeast(2, 0), absl::Now() + absl::Seconds(10),
               {{"w", w.view()}, {"b", b.view()}});
  CHECK(puller.in_flight());
  REQUIRE(puller.Await(1).ok());
  CHECK(b.data()[0] == 0.25f);
  REQUIRE(puller.Await(0).ok());
  CHECK(w.data()[511] == 0.5f);
  absl::StatusOr<ps::ModelVersion> v = puller.Join();
  REQUIRE(v.ok());
  CHECK(v->steps == std::vector<int64_t>{0, 0});
  CHECK(v->generation == 1);
  CHECK_FALSE(puller.in_flight());
  // A pull that cannot be answered in time is the group's error.
  puller.Start(ps::ModelVersion::AtLeast(2, 5),
               absl::Now() + absl::Milliseconds(50),
               {{"w", w.view()}, {"b", b.view()}});
  CHECK(absl::IsDeadlineExceeded(puller.Await(0)));
  CHECK(absl::IsDeadlineExceeded(puller.Join().status()));
}

}  // namespace
}  // namespace psgd
