// The UCX data plane of a real server (ps_server's PsGrpcServer with
// wire { data_plane: UCX }), attacked and used from a UCX messenger of the
// test's own, the shard's state read from the shard itself: a joined worker's
// push and pull go through; a stranger's key, another worker's key, a key
// taken back by Leave, a worker's key over another connection than its own, a
// header that is no request, and tensors that disagree with the shard's are
// dropped or refused with a counted reason, and the shard is unchanged.
#include "ps/server/ucx_data_plane.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "proto/ps.grpc.pb.h"
#include "ps/server/grpc_server.h"
#include "ps/wire/wire.h"

namespace psgd {
namespace ps {
namespace {

template <typename Request, typename Response, typename Call>
grpc::Status Unary(const Request& request, Response* response, Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return call(&ctx, request, response);
}

ucx::Key KeyOf(const wire::MembershipResponse& joined) {
  ucx::Key key{};
  REQUIRE(joined.ucx().key().size() == key.size());
  std::memcpy(key.data(), joined.ucx().key().data(), key.size());
  return key;
}

// A push of `values` as gradient `name` for `worker`, laid out as the
// data plane expects (ps/wire/wire.h's SegmentRanges).
ucx::Reply Push(ucx::Messenger* m, uint64_t peer, const ucx::Key& key,
                int worker, const std::string& name,
                const std::vector<float>& values,
                absl::Duration wait = absl::Seconds(30), int64_t step = 0) {
  wire::PushRequest request;
  request.set_cluster("ucx");
  request.set_worker_id(worker);
  request.set_step(step);
  const std::vector<int64_t> shape = {static_cast<int64_t>(values.size())};
  TensorBytes t = FloatTensorBytes(name, shape, values.data());
  std::vector<ucx::Segment> payload;
  for (absl::string_view r : SegmentRanges({t}, request.mutable_gradients())) {
    payload.push_back({r.data(), r.size()});
  }
  return m->CallAndWait(peer, kUcxPush, key, request.SerializeAsString(),
                        payload, absl::Now() + wait);
}

// A UCX messenger of the test's own and its endpoint to a server.
struct Link {
  std::unique_ptr<ucx::Messenger> m;
  uint64_t peer = 0;
};

Link ConnectTo(int port) {
  auto made = ucx::Messenger::Create(ucx::MessengerOptions());
  REQUIRE(made.ok());
  Link link{*std::move(made)};
  auto peer = link.m->Connect("127.0.0.1", port);
  REQUIRE(peer.ok());
  link.peer = *peer;
  return link;
}

// Worker `worker`'s pull for step `min_step` over `link`, its answer given
// to `done`; returns the call's number.
uint64_t StartPull(Link& link, const ucx::Key& key, int worker,
                   int64_t min_step, std::function<void(ucx::Reply)> done) {
  wire::PullRequest pull;
  pull.set_cluster("ucx");
  pull.set_worker_id(worker);
  pull.set_min_step(min_step);
  return link.m->Call(link.peer, kUcxPull, key, pull.SerializeAsString(), {},
                      nullptr, absl::Now() + absl::Seconds(60),
                      std::move(done));
}

// Whether `done` holds within 30 s.
bool Await(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!done() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

// A real server with the UCX data plane, sync N of 2, holding "x" = x
// (initialised over gRPC), and a gRPC stub to it.
struct UcxServer {
  explicit UcxServer(int n) {
    ServerOptions o;
    o.security.insecure = true;
    o.shard.cluster_name = "ucx";
    o.shard.total_num_replicas = 2;
    o.shard.replicas_to_aggregate = n;
    o.ucx = true;
    auto started = PsGrpcServer::Start(o);
    REQUIRE(started.ok());
    server = *std::move(started);
    REQUIRE(server->ucx() != nullptr);
    stub = wire::ParameterServer::NewStub(grpc::CreateChannel(
        server->address(), grpc::InsecureChannelCredentials()));
    wire::InitializeRequest init;
    init.set_cluster("ucx");
    TensorBytesToProto(FloatTensorBytes("x", {4}, x.data()),
                       init.add_variables());
    init.mutable_variables(0)->mutable_spec()->set_kind(wire::PARAMETER);
    wire::InitializeResponse init_reply;
    REQUIRE(Unary(init, &init_reply, [&](auto* c, auto& r, auto* p) {
              return stub->Initialize(c, r, p);
            }).ok());
  }
  // Worker `w` joins over gRPC; the reply names its UCX port and key.
  wire::MembershipResponse Join(int w, bool new_link = false) {
    wire::JoinRequest join;
    join.set_cluster("ucx");
    join.set_worker_id(w);
    join.set_ucx_new_link(new_link);
    wire::MembershipResponse joined;
    REQUIRE(Unary(join, &joined, [&](auto* c, auto& r, auto* p) {
              return stub->Join(c, r, p);
            }).ok());
    REQUIRE(joined.has_ucx());
    return joined;
  }
  // A connection of the test's own to the server's UCX port.
  Link Connect() { return ConnectTo(server->ucx()->port()); }

  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  std::unique_ptr<PsGrpcServer> server;
  std::unique_ptr<wire::ParameterServer::Stub> stub;
};

TEST_CASE("the UCX data plane serves joined workers and no one else") {
  UcxServer ucx(/*n=*/1);
  auto* server = &ucx.server;
  auto& stub = ucx.stub;
  const std::vector<float>& x = ucx.x;
  const wire::MembershipResponse joined[2] = {ucx.Join(0), ucx.Join(1)};
  const ucx::Key key0 = KeyOf(joined[0]);
  const ucx::Key key1 = KeyOf(joined[1]);
  CHECK(key0 != key1);
  CHECK(joined[0].ucx().port() == (*server)->ucx()->port());

  ucx::MessengerOptions mo;
  auto made = ucx::Messenger::Create(mo);
  REQUIRE(made.ok());
  std::unique_ptr<ucx::Messenger> m = *std::move(made);
  auto peer = m->Connect("127.0.0.1", joined[0].ucx().port());
  REQUIRE(peer.ok());
  ParameterShard* shard = (*server)->shard();
  const std::vector<float> g = {0.5f, 0.5f, 0.5f, 0.5f};

  // A stranger's key: dropped unread, nothing answered.
  ucx::Key stranger = key0;
  stranger[0] ^= 1;
  CHECK(Push(m.get(), *peer, stranger, 0, "x", g, absl::Milliseconds(300))
            .status.code() == absl::StatusCode::kDeadlineExceeded);
  // Worker 1's key on worker 0's push.
  ucx::Reply forged = Push(m.get(), *peer, key1, 0, "x", g);
  CHECK(forged.status.code() == absl::StatusCode::kPermissionDenied);
  // A header that is no PushRequest.
  ucx::Reply garbage =
      m->CallAndWait(*peer, kUcxPush, key0, std::string("\xff\xff\xff", 3), {},
                     absl::Now() + absl::Seconds(30));
  CHECK(garbage.status.code() == absl::StatusCode::kInvalidArgument);
  // Three floats for a tensor of four; a tensor the shard does not hold.
  ucx::Reply short_push =
      Push(m.get(), *peer, key0, 0, "x", {0.5f, 0.5f, 0.5f});
  CHECK(short_push.status.code() == absl::StatusCode::kInvalidArgument);
  ucx::Reply unknown = Push(m.get(), *peer, key0, 0, "y", g);
  CHECK_FALSE(unknown.status.ok());
  // An unknown method.
  ucx::Reply method =
      m->CallAndWait(*peer, 9, key0, "", {}, absl::Now() + absl::Seconds(30));
  CHECK(method.status.code() == absl::StatusCode::kInvalidArgument);
  // Commits (method 4), as the gRPC Commit call: with worker 1's key; one
  // whose header is no CommitRequest; and worker 0's own, which a lone
  // shard refuses (only shard 0 of several decides pushes).
  wire::CommitRequest commit;
  commit.set_cluster("ucx");
  commit.set_worker_id(0);
  commit.set_push_id(5);
  const std::string commit_bytes = commit.SerializeAsString();
  CHECK(m->CallAndWait(*peer, kUcxCommit, key1, commit_bytes, {},
                       absl::Now() + absl::Seconds(30))
            .status.code() == absl::StatusCode::kPermissionDenied);
  CHECK(m->CallAndWait(*peer, kUcxCommit, key0, std::string("\xff\xff", 2), {},
                       absl::Now() + absl::Seconds(30))
            .status.code() == absl::StatusCode::kInvalidArgument);
  ucx::Reply lone = m->CallAndWait(*peer, kUcxCommit, key0, commit_bytes, {},
                                   absl::Now() + absl::Seconds(30));
  CHECK(lone.status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(lone.status.message() ==
        "shard 0: commit of worker 0's push for step 0: only shard 0 of a "
        "cluster of several shards decides pushes");

  ShardStatus s = shard->Status();
  CHECK(s.step == 0);
  CHECK(s.counters.applied == 0);
  CHECK(s.pending_gradients == 0);
  UcxDataPlane::Counters c = (*server)->ucx()->counters();
  CHECK(c.messenger.bad_key == 1);
  CHECK(c.wrong_worker == 2);
  CHECK(c.malformed == 3);
  CHECK(c.commits == 1);

  // Worker 0's own push is applied; its pull returns what the shard holds.
  ucx::Reply pushed = Push(m.get(), *peer, key0, 0, "x", g);
  INFO(pushed.status.ToString());
  REQUIRE(pushed.status.ok());
  wire::PushResponse push_response;
  REQUIRE(push_response.ParseFromArray(pushed.header.data(),
                                       static_cast<int>(pushed.header.size())));
  CHECK(shard->Status().step == 1);
  wire::PullRequest pull;
  pull.set_cluster("ucx");
  pull.set_worker_id(0);
  pull.set_min_step(1);
  ucx::Reply pulled =
      m->CallAndWait(*peer, kUcxPull, key0, pull.SerializeAsString(), {},
                     absl::Now() + absl::Seconds(30));
  REQUIRE(pulled.status.ok());
  wire::PullResponse weights;
  REQUIRE(weights.ParseFromArray(pulled.header.data(),
                                 static_cast<int>(pulled.header.size())));
  CHECK(weights.step() == 1);
  auto tensors = TensorBytesFromProto(weights.variables(), pulled.payload);
  REQUIRE(tensors.ok());
  REQUIRE(tensors->size() == 1);
  ParameterShard::Snapshot held = shard->LatestWeights();
  REQUIRE((*tensors)[0].data.size() == 4 * sizeof(float));
  CHECK(std::memcmp((*tensors)[0].data.data(), held->weights[0].data(),
                    4 * sizeof(float)) == 0);
  CHECK(std::memcmp((*tensors)[0].data.data(), x.data(), sizeof x[0]) != 0);

  // Leave takes the key back: worker 0's next push is a stranger's.
  wire::LeaveRequest leave;
  leave.set_cluster("ucx");
  leave.set_worker_id(0);
  wire::MembershipResponse left;
  REQUIRE(Unary(leave, &left, [&](auto* c, auto& r, auto* p) {
            return stub->Leave(c, r, p);
          }).ok());
  CHECK(Push(m.get(), *peer, key0, 0, "x", g, absl::Milliseconds(300))
            .status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(shard->Status().step == 1);
  CHECK((*server)->ucx()->counters().messenger.bad_key == 2);
  // Worker 1 goes on.
  CHECK(Push(m.get(), *peer, key1, 1, "x", g, absl::Seconds(30), /*step=*/1)
            .status.ok());
  CHECK(shard->Status().step == 2);
}

TEST_CASE("a worker's key works only over the connection that used it first") {
  UcxServer ucx(/*n=*/1);
  ParameterShard* shard = ucx.server->shard();
  const ucx::Key key = KeyOf(ucx.Join(0, /*new_link=*/true));
  const std::vector<float> g = {0.5f, 0.5f, 0.5f, 0.5f};
  auto push = [&](Link& link, int64_t step, absl::Duration wait) {
    return Push(link.m.get(), link.peer, key, 0, "x", g, wait, step)
        .status.code();
  };
  constexpr absl::Duration kDropped = absl::Milliseconds(300);
  Link worker = ucx.Connect();
  REQUIRE(push(worker, 0, absl::Seconds(30)) == absl::StatusCode::kOk);
  CHECK(shard->Status().step == 1);
  // The key, read off the wire, pushed over another connection: dropped
  // unread, nothing applied.
  Link thief = ucx.Connect();
  CHECK(push(thief, 1, kDropped) == absl::StatusCode::kDeadlineExceeded);
  // The worker's lease renewed over its working link: still its own.
  CHECK(KeyOf(ucx.Join(0)) == key);
  CHECK(push(thief, 1, kDropped) == absl::StatusCode::kDeadlineExceeded);
  CHECK(shard->Status().step == 1);
  CHECK(ucx.server->ucx()->counters().messenger.other_connection == 2);
  // The worker connects anew and says so in its Join: the key is the new
  // connection's, and the old one's pushes are dropped.
  CHECK(KeyOf(ucx.Join(0, /*new_link=*/true)) == key);
  Link again = ucx.Connect();
  CHECK(push(again, 1, absl::Seconds(30)) == absl::StatusCode::kOk);
  CHECK(shard->Status().step == 2);
  CHECK(push(worker, 2, kDropped) == absl::StatusCode::kDeadlineExceeded);
  CHECK(shard->Status().step == 2);
  CHECK(ucx.server->ucx()->counters().messenger.other_connection == 3);
  CHECK(ucx.server->ucx()->counters().messenger.bad_key == 0);
}

TEST_CASE("a withdrawal is of a pull of its own connection, or refused") {
  UcxServer ucx(/*n=*/1);
  const ucx::Key key = KeyOf(ucx.Join(0, /*new_link=*/true));
  Link link = ucx.Connect();
  auto withdraw = [&](std::string header) {
    return link.m
        ->CallAndWait(link.peer, kUcxWithdraw, key, std::move(header), {},
                      absl::Now() + absl::Seconds(30))
        .status.code();
  };
  // A header that is no call number.
  CHECK(withdraw("short") == absl::StatusCode::kInvalidArgument);
  CHECK(ucx.server->ucx()->counters().malformed == 1);
  // A call number of no waiting pull: answered, nothing taken back.
  CHECK(withdraw(std::string(8, '\x07')) == absl::StatusCode::kOk);
  CHECK(ucx.server->ucx()->counters().pulls_withdrawn == 0);
  // The worker's own pushes go on.
  CHECK(Push(link.m.get(), link.peer, key, 0, "x", {0.5f, 0.5f, 0.5f, 0.5f})
            .status.ok());
  CHECK(ucx.server->shard()->Status().step == 1);
}

TEST_CASE("a withdrawal over another connection leaves a worker's pull be") {
  UcxServer ucx(/*n=*/2);
  wire::MembershipResponse joined[2];
  Link link[2];
  for (int w : {0, 1}) {
    joined[w] = ucx.Join(w, /*new_link=*/true);
    link[w] = ucx.Connect();
  }
  ParameterShard* shard = ucx.server->shard();
  const std::vector<float> g = {0.5f, 0.5f, 0.5f, 0.5f};
  // Worker 1's push is aggregated (N = 2); its pull waits for step 1.
  REQUIRE(Push(link[1].m.get(), link[1].peer, KeyOf(joined[1]), 1, "x", g)
              .status.ok());
  absl::Mutex mu;
  std::optional<ucx::Reply> answer;
  const uint64_t call =
      StartPull(link[1], KeyOf(joined[1]), 1, 1, [&](ucx::Reply r) {
        absl::MutexLock lock(&mu);
        answer = std::move(r);
      });
  REQUIRE(Await([&] { return shard->Status().pulls_waiting == 1; }));
  // Worker 0 names that pull's call number over its own connection, with
  // its own key: answered, and nothing is taken back.
  std::string header(sizeof call, '\0');
  std::memcpy(header.data(), &call, sizeof call);
  CHECK(link[0]
            .m
            ->CallAndWait(link[0].peer, kUcxWithdraw, KeyOf(joined[0]), header,
                          {}, absl::Now() + absl::Seconds(30))
            .status.ok());
  CHECK(shard->Status().pulls_waiting == 1);
  CHECK(ucx.server->ucx()->counters().pulls_withdrawn == 0);
  // Worker 0's push completes the step, and worker 1's pull is answered
  // with it.
  REQUIRE(Push(link[0].m.get(), link[0].peer, KeyOf(joined[0]), 0, "x", g)
              .status.ok());
  CHECK(shard->Status().step == 1);
  absl::MutexLock lock(&mu);
  CHECK(mu.AwaitWithDeadline(
      absl::Condition(
          +[](std::optional<ucx::Reply>* a) { return a->has_value(); },
          &answer),
      absl::Now() + absl::Seconds(30)));
  REQUIRE(answer.has_value());
  CHECK(answer->status.ok());
}

// As gRPC cancels a pull whose call ends, the data plane takes back from the
// shard a pull still waiting for its step when its worker's endpoint goes
// (the process killed): the shard does not count a dead worker as waiting
// (which would keep its lease from running out) nor answer into the void.
TEST_CASE("a waiting pull whose worker goes is taken back from the shard") {
  UcxServer ucx(/*n=*/2);
  wire::MembershipResponse joined[2];
  Link link[2];
  for (int w : {0, 1}) {
    joined[w] = ucx.Join(w);
    link[w] = ucx.Connect();
  }
  ParameterShard* shard = ucx.server->shard();
  const std::vector<float> g = {0.5f, 0.5f, 0.5f, 0.5f};

  // Worker 1's push is aggregated (N = 2); its pull waits for step 1.
  REQUIRE(Push(link[1].m.get(), link[1].peer, KeyOf(joined[1]), 1, "x", g)
              .status.ok());
  StartPull(link[1], KeyOf(joined[1]), 1, 1, [](ucx::Reply) {});
  REQUIRE(Await([&] { return shard->Status().pulls_waiting == 1; }));

  // Worker 1's process goes: its messenger closes every endpoint.
  link[1].m.reset();
  CHECK(Await([&] { return shard->Status().pulls_waiting == 0; }));
  CHECK(ucx.server->ucx()->counters().pulls_cancelled == 1);

  // The step completes with worker 0's push; nothing is left waiting.
  REQUIRE(Push(link[0].m.get(), link[0].peer, KeyOf(joined[0]), 0, "x", g)
              .status.ok());
  CHECK(shard->Status().step == 1);
  CHECK(shard->Status().pulls_waiting == 0);
  CHECK(ucx.server->ucx()->counters().pulls_cancelled == 1);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
