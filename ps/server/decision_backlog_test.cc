// The two limits of shard 0's decisions on their way to a follower (docs/PS.md,
// "One decision per push"), over real gRPC with the servers in process: a
// commit on shard 0 waits while more than 64 decisions have not reached the
// follower (ParameterShard::kMaxDecisionBacklog), and a follower stages at most
// 128 complete pushes of a worker and asks for the next later
// (ShardCore::kMaxCompletePerWorker). The follower is made unreachable
// through the production path: shard 0's ConnectPeers is pointed at an
// address where nothing listens, and pointed back at the follower to release
// it. After each case both shards hold the step and the weights, bit for bit,
// of a lone shard that was sent the same pushes in the same order. Tagged
// no_tsan (Debian's gRPC is not tsan-built).
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "proto/ps.grpc.pb.h"
#include "ps/server/grpc_server.h"

namespace psgd {
namespace ps {
namespace {

constexpr char kCluster[] = "backlog";
// The limits under test (ps/shard/shard.h; private there). A commit waits
// while MORE than kBacklog decisions have not reached every shard, so
// kBacklog + 1 may be on their way once it has gone through.
constexpr int kBacklog = 64;
constexpr int kStagedPerWorker = 128;
// A commit waits for the relay at most 5 s, then goes on with a warning
// (ParameterShard::AwaitRelayBacklog, shard.cc): a follower that is down is not
// waited for. A commit that waits has therefore not returned kWindow after it
// was sent, and one that does not wait has (a commit takes milliseconds).
constexpr absl::Duration kWindow = absl::Seconds(4);
constexpr absl::Duration kLong = absl::Seconds(60);
constexpr int kElements = 4;  // of each variable

using Stub = wire::ParameterServer::Stub;

void SetTensor(const std::string& name, const std::vector<float>& values,
               wire::TensorData* t) {
  t->mutable_spec()->set_name(name);
  t->mutable_spec()->add_shape(static_cast<int64_t>(values.size()));
  t->set_dtype(wire::DT_FLOAT32);
  t->set_data(reinterpret_cast<const char*>(values.data()),
              values.size() * sizeof(float));
}

std::string Var(int v) { return absl::StrCat("v", v); }

// Worker `worker`'s gradient of variable v<v> for step `step`: different for
// every push, so that a push lost, repeated or applied with another
// staleness changes the weights.
std::vector<float> Gradient(int worker, int64_t step, int v) {
  std::vector<float> g(kElements);
  for (int i = 0; i < kElements; ++i) {
    g[i] = 0.01f * static_cast<float>(
                       (worker * 31 + step * 7 + v * 13 + i * 5) % 23 - 11);
  }
  return g;
}

struct Committed {
  grpc::Status status;
  wire::PushResponse reply;
};

// servers[0] and servers[1]: a cluster of two shards (async, workers 0 and
// 1, Adam with the learning rate scaled by staleness), shard i holding
// v<i>; servers[2]: a lone shard of the same options holding both, the
// reference. Both workers joined everywhere.
struct Cluster {
  Cluster() {
    for (int i = 0; i < 3; ++i) {
      ServerOptions o;
      o.security.insecure = true;
      o.shard.cluster_name = kCluster;
      o.shard.mode = Mode::kAsync;
      o.shard.total_num_replicas = 2;
      o.shard.scale_lr_by_staleness = true;
      o.shard.num_shards = i < 2 ? 2 : 1;
      o.shard.shard_index = i < 2 ? i : 0;
      auto server = PsGrpcServer::Start(o);
      REQUIRE(server.ok());
      servers.push_back(*std::move(server));
      grpc::ChannelArguments args;
      stubs.push_back(wire::ParameterServer::NewStub(
          grpc::CreateCustomChannel(servers.back()->address(),
                                    grpc::InsecureChannelCredentials(), args)));
    }
    addresses = {servers[0]->address(), servers[1]->address()};
    // A socket in a directory that does not exist: every connection is
    // refused at once.
    unreachable = {servers[0]->address(),
                   "unix:/nonexistent/psgd-nothing-listens-here"};
    Release();
    for (int i = 0; i < 3; ++i) {
      wire::InitializeRequest init;
      init.set_cluster(kCluster);
      for (int v = 0; v < 2; ++v) {
        if (i < 2 && v != i) continue;
        wire::TensorData* t = init.add_variables();
        SetTensor(Var(v), std::vector<float>(kElements, 0.5f + v), t);
        t->mutable_spec()->set_kind(wire::PARAMETER);
      }
      wire::InitializeResponse initialized;
      REQUIRE(Call(i, init, &initialized, &Stub::Initialize).ok());
      for (int worker = 0; worker < 2; ++worker) {
        wire::JoinRequest join;
        join.set_cluster(kCluster);
        join.set_worker_id(worker);
        wire::MembershipResponse joined;
        REQUIRE(Call(i, join, &joined, &Stub::Join).ok());
      }
    }
  }
  ~Cluster() {
    for (auto& s : servers) s->Stop(absl::Seconds(1));
  }

  template <typename Request, typename Response, typename Method>
  grpc::Status Call(int i, const Request& request, Response* response,
                    Method method) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kLong));
    return ((*stubs[i]).*method)(&ctx, request, response);
  }

  // Shard 0's decisions go nowhere (the follower is unreachable), or to
  // the follower again.
  void Block() { REQUIRE(servers[0]->ConnectPeers(unreachable).ok()); }
  void Release() { REQUIRE(servers[0]->ConnectPeers(addresses).ok()); }
  bool Delivered() {
    return servers[0]->shard()->AwaitDecisionsDelivered(absl::Now() + kLong);
  }
  int64_t Step(int i) { return servers[i]->shard()->Status().step; }

  // The push of `worker` computed from `step` (its id step + 1), staged on
  // shard `i` (v<i>'s gradient).
  grpc::Status Stage(int i, int worker, int64_t step) {
    wire::PushRequest push;
    push.set_cluster(kCluster);
    push.set_worker_id(worker);
    push.set_step(step);
    push.set_push_id(static_cast<uint64_t>(step) + 1);
    SetTensor(Var(i), Gradient(worker, step, i), push.add_gradients());
    wire::PushResponse reply;
    grpc::Status s = Call(i, push, &reply, &Stub::Push);
    if (s.ok() && !reply.staged()) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "not staged");
    }
    return s;
  }
  void StageOnBoth(int worker, int64_t step) {
    for (int i = 0; i < 2; ++i) {
      const grpc::Status s = Stage(i, worker, step);
      INFO("shard " << i << ": " << s.error_message());
      REQUIRE(s.ok());
    }
  }
  Committed Commit(int worker, int64_t step) {
    wire::CommitRequest commit;
    commit.set_cluster(kCluster);
    commit.set_worker_id(worker);
    commit.set_step(step);
    commit.set_push_id(static_cast<uint64_t>(step) + 1);
    Committed c;
    c.status = Call(0, commit, &c.reply, &Stub::Commit);
    return c;
  }
  std::future<Committed> CommitLater(int worker, int64_t step) {
    return std::async(std::launch::async,
                      [this, worker, step] { return Commit(worker, step); });
  }
  // The same push, whole, to the lone shard: applied at once.
  void Reference(int worker, int64_t step) {
    wire::PushRequest push;
    push.set_cluster(kCluster);
    push.set_worker_id(worker);
    push.set_step(step);
    for (int v = 0; v < 2; ++v) {
      SetTensor(Var(v), Gradient(worker, step, v), push.add_gradients());
    }
    wire::PushResponse reply;
    REQUIRE(Call(2, push, &reply, &Stub::Push).ok());
    REQUIRE(reply.outcome() == wire::APPLIED);
  }
  // Worker 1 pushes `steps` times, each computed from the latest step (the
  // follower's too: each decision reaches it before the next push), to
  // shards whose decisions reach the follower: the cluster and the lone
  // shard at step `steps`. The follower's step is then ahead of worker 0's
  // pushes, which may be computed from any step up to it.
  void Pace(int64_t steps) {
    for (int64_t step = 0; step < steps; ++step) {
      StageOnBoth(1, step);
      Committed c = Commit(1, step);
      REQUIRE(c.status.ok());
      REQUIRE(c.reply.outcome() == wire::APPLIED);
      Reference(1, step);
      REQUIRE(Delivered());
    }
    REQUIRE(Step(1) == steps);
  }

  // Server i's variables by name, pulled at step `step`.
  std::map<std::string, std::string> Weights(int i, int64_t step) {
    wire::PullRequest pull;
    pull.set_cluster(kCluster);
    pull.set_min_step(step);
    pull.set_worker_id(-1);
    wire::PullResponse weights;
    const grpc::Status s = Call(i, pull, &weights, &Stub::Pull);
    REQUIRE(s.ok());
    CHECK(weights.step() == step);
    std::map<std::string, std::string> out;
    for (const wire::TensorData& t : weights.variables()) {
      out[t.spec().name()] = t.data();
    }
    return out;
  }
  // Every server at `step`, the shards holding the lone shard's weights.
  void ExpectSameAsReference(int64_t step) {
    for (int i = 0; i < 3; ++i) CHECK(Step(i) == step);
    const std::map<std::string, std::string> lone = Weights(2, step);
    REQUIRE(lone.size() == 2);
    for (int i = 0; i < 2; ++i) {
      INFO("shard " << i);
      const std::map<std::string, std::string> shard = Weights(i, step);
      REQUIRE(shard.size() == 1);
      REQUIRE(shard.count(Var(i)) == 1);
      CHECK(shard.at(Var(i)).size() == kElements * sizeof(float));
      CHECK(shard.at(Var(i)) == lone.at(Var(i)));  // bit for bit
    }
  }

  std::vector<std::unique_ptr<PsGrpcServer>> servers;
  std::vector<std::unique_ptr<Stub>> stubs;
  std::vector<std::string> addresses;
  std::vector<std::string> unreachable;
};

TEST_CASE(
    "shard 0 commits while at most 64 decisions are on their way to a "
    "follower; the next commit waits until the follower takes them") {
  Cluster c;
  // Worker 0's pushes are computed from steps 0 .. kBacklog + 1, all at or
  // below the follower's step while it takes nothing.
  const int64_t ahead = kBacklog + 6;
  c.Pace(ahead);
  c.Block();
  // The first kBacklog + 1 commits find at most kBacklog decisions on their
  // way, and go through: none waits.
  const int through = kBacklog + 1;
  for (int64_t step = 0; step < through; ++step) {
    INFO("commit " << step + 1);
    c.StageOnBoth(0, step);
    std::future<Committed> commit = c.CommitLater(0, step);
    REQUIRE(commit.wait_for(absl::ToChronoNanoseconds(kWindow)) ==
            std::future_status::ready);
    const Committed done = commit.get();
    REQUIRE(done.status.ok());
    CHECK(done.reply.outcome() == wire::APPLIED);
    CHECK(done.reply.step() == ahead + step + 1);
    c.Reference(0, step);
  }
  CHECK(c.Step(0) == ahead + through);
  CHECK(c.Step(1) == ahead);  // the follower has none of them

  // The next one waits: kBacklog + 1 decisions are on their way.
  c.StageOnBoth(0, through);
  std::future<Committed> waiting = c.CommitLater(0, through);
  CHECK(waiting.wait_for(absl::ToChronoNanoseconds(kWindow)) ==
        std::future_status::timeout);
  CHECK(c.Step(0) == ahead + through);  // not decided yet
  CHECK(c.Step(1) == ahead);

  // The follower reachable again: it takes every decision, and the commit
  // that waited is decided after them.
  c.Release();
  REQUIRE(waiting.wait_for(absl::ToChronoNanoseconds(kLong)) ==
          std::future_status::ready);
  const Committed done = waiting.get();
  REQUIRE(done.status.ok());
  CHECK(done.reply.outcome() == wire::APPLIED);
  CHECK(done.reply.step() == ahead + through + 1);
  c.Reference(0, through);
  REQUIRE(c.Delivered());
  c.ExpectSameAsReference(ahead + through + 1);
}

TEST_CASE(
    "a follower stages at most 128 complete pushes of a worker, asks for "
    "the next later, and takes it once shard 0's decisions reach it") {
  Cluster c;
  // The most complete pushes of worker 0 the follower holds.
  const int held = kStagedPerWorker;
  // Worker 0's pushes are computed from steps 0 .. held, all at or below
  // the follower's step while it takes nothing.
  const int64_t ahead = held + 2;
  c.Pace(ahead);
  c.Block();
  // `held` pushes staged on both shards; shard 0 decides the
  // first kBacklog + 1 (as many as go through without waiting, above),
  // which the follower keeps for their decisions.
  const int decided = kBacklog + 1;
  for (int64_t step = 0; step < held; ++step) {
    INFO("push " << step + 1);
    c.StageOnBoth(0, step);
    if (step < decided) {
      const Committed done = c.Commit(0, step);
      REQUIRE(done.status.ok());
      CHECK(done.reply.outcome() == wire::APPLIED);
      c.Reference(0, step);
    }
  }
  CHECK(c.Step(0) == ahead + decided);
  CHECK(c.Step(1) == ahead);

  // The next push: shard 0 holds held - decided of worker 0's and stages
  // it; the follower holds `held` and asks for it later.
  const int64_t next = held;
  REQUIRE(c.Stage(0, 0, next).ok());
  const grpc::Status later = c.Stage(1, 0, next);
  CHECK(later.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(later.error_message(),
             Catch::Contains(absl::StrCat(
                 held,
                 " pushes of worker 0 wait for shard 0's decisions here: "
                 "try again")));

  // The decisions reach the follower, which spends the pushes they name:
  // it takes the push now.
  c.Release();
  REQUIRE(c.Delivered());
  CHECK(c.Step(1) == ahead + decided);
  REQUIRE(c.Stage(1, 0, next).ok());
  for (int64_t step = decided; step <= next; ++step) {
    INFO("commit " << step + 1);
    const Committed done = c.Commit(0, step);
    REQUIRE(done.status.ok());
    CHECK(done.reply.outcome() == wire::APPLIED);
    c.Reference(0, step);
  }
  REQUIRE(c.Delivered());
  c.ExpectSameAsReference(ahead + next + 1);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
