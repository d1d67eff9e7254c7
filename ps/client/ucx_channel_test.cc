// The worker's side of the UCX data plane (ps/client/ucx_channel.h) against
// a real server (ps_server's PsGrpcServer with wire { data_plane: UCX }), the
// shard's state read from the shard itself and the worker's messenger's
// drops from the messenger: a Join links the channel; a pull the worker
// gives up on, by its deadline or by Cancel, is withdrawn from the shard (as
// gRPC cancels a call's server side), so that the step that comes later
// answers nothing into the void; the channel goes on serving.
#include "ps/client/ucx_channel.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/testing/eventually.h"
#include "proto/ps.grpc.pb.h"
#include "ps/client/grpc_channel.h"
#include "ps/server/grpc_server.h"
#include "ps/wire/wire.h"

namespace psgd {
namespace ps {
namespace {

constexpr char kCluster[] = "ucx-channel";

// A real server with the UCX data plane, sync N = 1 of 1, holding "x".
std::unique_ptr<PsGrpcServer> StartServer() {
  ServerOptions o;
  o.security.insecure = true;
  o.shard.cluster_name = kCluster;
  o.shard.total_num_replicas = 1;
  o.shard.replicas_to_aggregate = 1;
  o.ucx = true;
  auto started = PsGrpcServer::Start(o);
  REQUIRE(started.ok());
  std::unique_ptr<PsGrpcServer> server = *std::move(started);
  REQUIRE(server->ucx() != nullptr);
  return server;
}

struct Worker {
  explicit Worker(PsGrpcServer* server) {
    auto made = ucx::Messenger::Create(ucx::MessengerOptions());
    REQUIRE(made.ok());
    messenger = *std::move(made);
    const std::string address = server->address();
    channel = std::make_unique<UcxShardChannel>(
        std::make_unique<GrpcShardChannel>(0, address,
                                           CreatePsChannel(address, 64 << 20)),
        messenger, "127.0.0.1");
    const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
    wire::InitializeRequest init;
    init.set_cluster(kCluster);
    TensorBytesToProto(FloatTensorBytes("x", {4}, x.data()),
                       init.add_variables());
    init.mutable_variables(0)->mutable_spec()->set_kind(wire::PARAMETER);
    wire::InitializeResponse init_reply;
    REQUIRE(channel->Initialize(init, Later(), &init_reply)->Await().ok());
    wire::JoinRequest join;
    join.set_cluster(kCluster);
    join.set_worker_id(0);
    wire::MembershipResponse joined;
    REQUIRE(channel->Join(join, Later(), &joined)->Await().ok());
    REQUIRE(channel->linked());
  }

  static absl::Time Later() { return absl::Now() + absl::Seconds(30); }

  // A pull of the weights of step `min_step` or later.
  wire::PullRequest Pull(int64_t min_step) const {
    wire::PullRequest pull;
    pull.set_cluster(kCluster);
    pull.set_worker_id(0);
    pull.set_min_step(min_step);
    return pull;
  }

  std::shared_ptr<ucx::Messenger> messenger;
  std::unique_ptr<UcxShardChannel> channel;
};

TEST_CASE("a pull the worker gives up on is withdrawn from the shard") {
  std::unique_ptr<PsGrpcServer> server = StartServer();
  ParameterShard* shard = server->shard();
  Worker worker(server.get());
  const int64_t received_before = worker.channel->ucx_received_bytes();

  // By its deadline: step 1 does not come.
  std::unique_ptr<ShardExchange> late = worker.channel->NewExchange();
  late->StartPull(worker.Pull(1), absl::Now() + absl::Milliseconds(300));
  CHECK(late->Await().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(Eventually(
      [&] { return server->ucx()->counters().pulls_withdrawn == 1; }));
  CHECK(shard->Status().pulls_waiting == 0);

  // By Cancel, from another thread, while it waits in the shard.
  std::unique_ptr<ShardExchange> cancelled = worker.channel->NewExchange();
  cancelled->StartPull(worker.Pull(1), Worker::Later());
  REQUIRE(Eventually([&] { return shard->Status().pulls_waiting == 1; }));
  std::thread canceller([&] { cancelled->Cancel(); });
  CHECK(cancelled->Await().code() == absl::StatusCode::kCancelled);
  canceller.join();
  CHECK(Eventually(
      [&] { return server->ucx()->counters().pulls_withdrawn == 2; }));
  CHECK(shard->Status().pulls_waiting == 0);

  // Step 1 comes: nothing is answered into the void, and the worker's own
  // pull of it is served.
  const std::vector<float> g = {0.5f, 0.5f, 0.5f, 0.5f};
  wire::PushRequest push;
  push.set_cluster(kCluster);
  push.set_worker_id(0);
  push.set_step(0);
  const std::vector<TensorBytes> grads = {FloatTensorBytes("x", {4}, g.data())};
  std::unique_ptr<ShardExchange> pusher = worker.channel->NewExchange();
  pusher->StartPush(push, grads, nullptr, Worker::Later(), PushMethod::kPush);
  REQUIRE(pusher->Await().ok());
  CHECK(shard->Status().step == 1);
  std::unique_ptr<ShardExchange> puller = worker.channel->NewExchange();
  puller->StartPull(worker.Pull(1), Worker::Later());
  REQUIRE(puller->Await().ok());
  CHECK(worker.messenger->drops().unknown_call == 0);
  CHECK(worker.channel->ucx_received_bytes() > received_before);
  CHECK(server->ucx()->counters().pulls_withdrawn == 2);
  CHECK(server->ucx()->counters().pulls_cancelled == 0);
}

TEST_CASE("a commit goes over the link, as the gRPC Commit call would") {
  std::unique_ptr<PsGrpcServer> server = StartServer();
  Worker w(server.get());
  std::unique_ptr<ShardExchange> exchange = w.channel->NewExchange();
  wire::CommitRequest commit;
  commit.set_cluster(kCluster);
  commit.set_worker_id(0);
  commit.set_push_id(3);
  exchange->StartCommit(commit, Worker::Later());
  // A lone shard decides no commit; the refusal comes back over UCX.
  absl::Status s = exchange->Await();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() ==
        "shard 0: commit of worker 0's push for step 0: only shard 0 of a "
        "cluster of several shards decides pushes");
  CHECK(server->ucx()->counters().commits == 1);
  CHECK(server->ucx()->counters().pushes == 0);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
