// The UCX messenger (ps/ucx/messenger.h): calls and replies of every size
// over tcp and over shared memory, keys, deadlines, cancels, a peer killed
// with calls under way, and messages from a stranger that speaks UCP
// directly (the attack written here, not by the messenger).
#include "ps/ucx/messenger.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/mutex.h"
#include "common/testing/eventually.h"

extern char** environ;

namespace psgd {
namespace ps {
namespace ucx {
namespace {

constexpr Key kKey = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

std::unique_ptr<Messenger> NewMessenger(const std::string& transports = "tcp") {
  MessengerOptions options;
  options.transports = transports;
  auto messenger = Messenger::Create(options);
  REQUIRE(messenger.ok());
  return std::move(*messenger);
}

// A listener whose handler keeps every request (and can answer later) or
// echoes it at once.
bool Aligned(absl::string_view payload) {
  return reinterpret_cast<uintptr_t>(payload.data()) % kPayloadAlign == 0;
}

class Server {
 public:
  explicit Server(bool echo, const std::string& transports = "tcp")
      : messenger_(NewMessenger(transports)) {
    auto port =
        messenger_->Listen("127.0.0.1", 0, [this, echo](Request request) {
          MutexLock lock(&mu_);
          handled_++;
          auto kept = std::make_shared<Request>(std::move(request));
          if (echo) {
            // Answers with the method in the header and the payload back.
            messenger_->Respond(
                kept->peer, kept->call, absl::OkStatus(),
                std::to_string(kept->method) + ":" + std::string(kept->header) +
                    // What the handler is promised of every request.
                    (Aligned(kept->payload) ? "" : " (payload misaligned)") +
                    (kept->key == kKey ? "" : " (another key)"),
                {{kept->payload.data(), kept->payload.size()}}, kept);
          } else {
            held_.push_back(kept);
          }
        });
    REQUIRE(port.ok());
    port_ = *port;
    messenger_->AcceptKey(kKey);
  }
  Messenger& messenger() { return *messenger_; }
  int port() const { return port_; }
  int handled() {
    MutexLock lock(&mu_);
    return handled_;
  }
  std::shared_ptr<Request> TakeHeld() {
    MutexLock lock(&mu_);
    if (held_.empty()) return nullptr;
    auto request = held_.front();
    held_.pop_front();
    return request;
  }

 private:
  Mutex mu_;
  int handled_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::shared_ptr<Request>> held_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Messenger> messenger_;
  int port_ = 0;
};

std::string Pattern(size_t size, int seed) {
  std::string bytes(size, '\0');
  uint32_t x = 2463534242u + seed;
  for (char& c : bytes) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return bytes;
}

TEST_CASE("a call and its reply carry headers and payloads of every size") {
  const std::string transports = GENERATE("tcp", "posix,cma,tcp");
  // 0, eager, and past the rendezvous threshold (UCX's default is tens of KB
  // over tcp), payload in one piece and in three.
  const size_t size = GENERATE(0, 100, 64 << 10, 9 << 20);
  INFO("transports " << transports << ", payload " << size);
  Server server(/*echo=*/true, transports);
  auto client = NewMessenger(transports);
  auto peer = client->Connect("127.0.0.1", server.port());
  REQUIRE(peer.ok());
  const std::string payload = Pattern(size, 7);
  const size_t third = size / 3;
  std::vector<Segment> one = {{payload.data(), payload.size()}};
  std::vector<Segment> three = {{payload.data(), third},
                                {payload.data() + third, third},
                                {payload.data() + 2 * third, size - 2 * third}};
  for (const auto& segments : {one, three}) {
    Reply reply = client->CallAndWait(*peer, 7, kKey, "header", segments,
                                      absl::Now() + absl::Seconds(30));
    REQUIRE(reply.status.ok());
    CHECK(reply.header == "7:header");
    CHECK(reply.payload.size() == size);
    CHECK(reply.payload == payload);
    CHECK(Aligned(reply.payload));
  }
  CHECK(server.handled() == 2);
  CHECK(server.messenger().drops().bad_key == 0);
}

TEST_CASE("a large message's buffer is taken again by the next one") {
  Server server(/*echo=*/true, "tcp");
  auto client = NewMessenger("tcp");
  auto peer = client->Connect("127.0.0.1", server.port());
  REQUIRE(peer.ok());
  const std::string payload = Pattern(5 << 20, 3);  // past 4 MiB
  const std::vector<Segment> one = {{payload.data(), payload.size()}};
  const int64_t before = PooledBuffersAllocated();
  constexpr int kCalls = 6;
  for (int i = 0; i < kCalls; ++i) {
    Reply reply = client->CallAndWait(*peer, 7, kKey, "header", one,
                                      absl::Now() + absl::Seconds(30));
    REQUIRE(reply.status.ok());
    CHECK(reply.payload == payload);
  }
  // Each call receives two such messages (the request on the server, the
  // reply here), freed before the next call: without the pool every one
  // is a fresh buffer (2 * kCalls); with it, the first call's two (and at
  // most one more, should a request arrive before its predecessor's buffer
  // is given back); none when an earlier test left buffers of that size.
  CHECK(PooledBuffersAllocated() - before <= 3);
}

TEST_CASE("the handler's error reaches the caller with its message") {
  auto server = NewMessenger();
  Messenger* m = server.get();
  auto port = server->Listen("127.0.0.1", 0, [m](Request request) {
    m->Respond(request.peer, request.call,
               absl::FailedPreconditionError("not now: " +
                                             std::string(request.header)),
               "", {}, nullptr);
  });
  REQUIRE(port.ok());
  server->AcceptKey(kKey);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", *port);
  REQUIRE(peer.ok());
  Reply reply = client->CallAndWait(*peer, 1, kKey, "step 3", {},
                                    absl::Now() + absl::Seconds(30));
  CHECK(reply.status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(reply.status.message() == "not now: step 3");
}

TEST_CASE("a handler may revoke the key it was called with") {
  // AcceptKey, RevokeKey, Connect and Disconnect wait for the messenger's
  // thread; called from it (a handler, a call's done) they run at once.
  auto server = NewMessenger();
  Messenger* m = server.get();
  auto port = server->Listen("127.0.0.1", 0, [m](Request request) {
    m->RevokeKey(kKey);
    m->Respond(request.peer, request.call, absl::OkStatus(), "revoked", {},
               nullptr);
  });
  REQUIRE(port.ok());
  server->AcceptKey(kKey);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", *port);
  REQUIRE(peer.ok());
  Reply first = client->CallAndWait(*peer, 1, kKey, "", {},
                                    absl::Now() + absl::Seconds(30));
  REQUIRE(first.status.ok());
  CHECK(first.header == "revoked");
  Reply second = client->CallAndWait(*peer, 1, kKey, "", {},
                                     absl::Now() + absl::Milliseconds(300));
  CHECK(second.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(server->drops().bad_key == 1);
}

TEST_CASE("a call with a key the listener does not accept never reaches it") {
  Server server(/*echo=*/true);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", server.port());
  REQUIRE(peer.ok());
  Key stranger = kKey;
  stranger[15] ^= 1;
  const std::string large = Pattern(4 << 20, 1);  // by rendezvous
  const std::vector<std::vector<Segment>> payloads = {
      {{large.data(), large.size()}}, {}};
  for (const std::vector<Segment>& segments : payloads) {
    Reply reply = client->CallAndWait(*peer, 1, stranger, "h", segments,
                                      absl::Now() + absl::Milliseconds(300));
    CHECK(reply.status.code() == absl::StatusCode::kDeadlineExceeded);
  }
  CHECK(server.handled() == 0);
  CHECK(server.messenger().drops().bad_key == 2);
  // The listener goes on serving; a revoked key is a stranger's.
  Reply good = client->CallAndWait(*peer, 1, kKey, "h", {},
                                   absl::Now() + absl::Seconds(30));
  CHECK(good.status.ok());
  server.messenger().RevokeKey(kKey);
  Reply revoked = client->CallAndWait(*peer, 1, kKey, "h", {},
                                      absl::Now() + absl::Milliseconds(300));
  CHECK(revoked.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(server.handled() == 1);
  CHECK(server.messenger().drops().bad_key == 3);
}

TEST_CASE("KeysEqual: equal keys only, a difference in any byte counts") {
  CHECK(KeysEqual(kKey, kKey));
  for (size_t i = 0; i < kKey.size(); ++i) {
    for (uint8_t bit : {uint8_t{1}, uint8_t{0x80}}) {
      Key other = kKey;
      other[i] ^= bit;
      INFO("byte " << i << " bit " << int(bit));
      CHECK_FALSE(KeysEqual(kKey, other));
      CHECK_FALSE(KeysEqual(other, kKey));
    }
  }
  CHECK(KeysEqual(Key{}, Key{}));
}

TEST_CASE("among many accepted keys each finds its own; near misses do not") {
  // The listener compares the carried key with every accepted one
  // (KeysEqual), not a lookup by the key: the accepted set behaves as before.
  Server server(/*echo=*/true);
  std::vector<Key> keys;
  for (uint8_t i = 0; i < 20; ++i) {
    Key key = kKey;
    key[i % 16] = static_cast<uint8_t>(key[i % 16] + 100 + i);
    keys.push_back(key);
    server.messenger().AcceptKey(key);
  }
  server.messenger().AcceptKey(keys[3]);  // twice: still one entry
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", server.port());
  REQUIRE(peer.ok());
  for (const Key& key : {keys[0], keys[3], keys[19], kKey}) {
    Reply reply = client->CallAndWait(*peer, 1, key, "h", {},
                                      absl::Now() + absl::Seconds(30));
    CHECK(reply.status.ok());
  }
  // A key with its first or its last byte wrong is a stranger's.
  Key first = keys[5];
  first[0] ^= 1;
  Key last = keys[5];
  last[15] ^= 1;
  for (const Key& key : {first, last}) {
    Reply reply = client->CallAndWait(*peer, 1, key, "h", {},
                                      absl::Now() + absl::Milliseconds(300));
    CHECK(reply.status.code() == absl::StatusCode::kDeadlineExceeded);
  }
  CHECK(server.messenger().drops().bad_key == 2);
  // Revoked once, refused, though it was accepted twice.
  server.messenger().RevokeKey(keys[3]);
  Reply revoked = client->CallAndWait(*peer, 1, keys[3], "h", {},
                                      absl::Now() + absl::Milliseconds(300));
  CHECK(revoked.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(server.handled() == 4);
}

// A client that speaks UCP itself: sends active messages with any header.
class RawClient {
 public:
  explicit RawClient(int port) {
    ucp_config_t* config = nullptr;
    REQUIRE(ucp_config_read(nullptr, nullptr, &config) == UCS_OK);
    REQUIRE(ucp_config_modify(config, "TLS", "tcp") == UCS_OK);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM;
    REQUIRE(ucp_init(&params, config, &context_) == UCS_OK);
    ucp_config_release(config);
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    REQUIRE(ucp_worker_create(context_, &worker_params, &worker_) == UCS_OK);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_FLAGS |
                           UCP_EP_PARAM_FIELD_SOCK_ADDR |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep_params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    ep_params.sockaddr.addrlen = sizeof addr;
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    REQUIRE(ucp_ep_create(worker_, &ep_params, &ep_) == UCS_OK);
  }
  ~RawClient() {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    Wait(ucp_ep_close_nbx(ep_, &param));
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  }
  // Sends active message `id` and waits until UCX has sent it.
  ucs_status_t Send(unsigned id, const std::string& header,
                    const std::string& data, bool reply_flag = true) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = reply_flag ? UCP_AM_SEND_FLAG_REPLY : 0;
    return Wait(ucp_am_send_nbx(ep_, id, header.data(), header.size(),
                                data.data(), data.size(), &param));
  }

 private:
  ucs_status_t Wait(ucs_status_ptr_t request) {
    if (!UCS_PTR_IS_PTR(request)) return UCS_PTR_STATUS(request);
    ucs_status_t status;
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS &&
           absl::Now() < give_up) {
      ucp_worker_progress(worker_);
    }
    ucp_request_free(request);
    return status;
  }
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

// The request head as the messenger lays it out (ps/ucx/messenger.cc):
// magic, method, call, key, header size.
std::string RequestHead(uint32_t magic, uint64_t call, const Key& key,
                        uint64_t header_size) {
  std::string head(40, '\0');
  const uint32_t method = 1;
  std::memcpy(&head[0], &magic, 4);
  std::memcpy(&head[4], &method, 4);
  std::memcpy(&head[8], &call, 8);
  std::memcpy(&head[16], key.data(), 16);
  std::memcpy(&head[32], &header_size, 8);
  return head;
}

TEST_CASE("a key belongs to the connection that first uses it") {
  // The attack: the owner's key read off the wire and sent by hand over a
  // connection of the thief's own.
  Server server(/*echo=*/true);
  constexpr uint32_t kMagic = 0x70736751;
  auto owner = NewMessenger();
  auto owner_peer = owner->Connect("127.0.0.1", server.port());
  REQUIRE(owner_peer.ok());
  auto call = [&](absl::Duration wait) {
    return owner->CallAndWait(*owner_peer, 1, kKey, "h", {},
                              absl::Now() + wait);
  };
  REQUIRE(call(absl::Seconds(30)).status.ok());
  RawClient thief(server.port());
  // Eager and by rendezvous: dropped unread, counted apart from a
  // stranger's key.
  CHECK(thief.Send(1, RequestHead(kMagic, 5, kKey, 0), "x") == UCS_OK);
  CHECK(thief.Send(1, RequestHead(kMagic, 6, kKey, 0), Pattern(4 << 20, 3)) ==
        UCS_OK);
  REQUIRE(Eventually(
      [&] { return server.messenger().drops().other_connection == 2; }));
  CHECK(server.handled() == 1);
  CHECK(server.messenger().drops().bad_key == 0);
  // Accepting it again (a renewal) keeps it on the owner's connection.
  server.messenger().AcceptKey(kKey);
  CHECK(thief.Send(1, RequestHead(kMagic, 7, kKey, 0), "x") == UCS_OK);
  REQUIRE(Eventually(
      [&] { return server.messenger().drops().other_connection == 3; }));
  CHECK(call(absl::Seconds(30)).status.ok());
  CHECK(server.handled() == 2);
  // Released, it goes to the next connection that uses it (here the
  // thief's), and the owner's requests are then dropped.
  server.messenger().ReleaseKey(kKey);
  CHECK(thief.Send(1, RequestHead(kMagic, 8, kKey, 0), "x") == UCS_OK);
  REQUIRE(Eventually([&] { return server.handled() == 3; }));
  CHECK(call(absl::Milliseconds(300)).status.code() ==
        absl::StatusCode::kDeadlineExceeded);
  CHECK(server.handled() == 3);
  CHECK(server.messenger().drops().other_connection == 4);
}

TEST_CASE("messages from a stranger speaking UCP are dropped and counted") {
  Server server(/*echo=*/true);
  constexpr uint32_t kMagic = 0x70736751;
  Key stranger{};
  {
    RawClient raw(server.port());
    // The right layout with a key nobody was given, eager and rendezvous.
    CHECK(raw.Send(1, RequestHead(kMagic, 5, stranger, 0), "x") == UCS_OK);
    CHECK(raw.Send(1, RequestHead(kMagic, 6, stranger, 0),
                   Pattern(4 << 20, 2)) == UCS_OK);
    // A valid key but a header longer than the message.
    CHECK(raw.Send(1, RequestHead(kMagic, 7, kKey, 1000), "short") == UCS_OK);
    // Another magic number; a head of the wrong size; no reply endpoint.
    CHECK(raw.Send(1, RequestHead(kMagic + 1, 8, kKey, 0), "") == UCS_OK);
    CHECK(raw.Send(1, "tiny", "") == UCS_OK);
    CHECK(raw.Send(1, RequestHead(kMagic, 9, kKey, 0), "", false) == UCS_OK);
    // A reply to a call the listener never made.
    std::string reply_head(32, '\0');
    const uint32_t reply_magic = 0x70736752;
    const uint64_t call = 12345;
    std::memcpy(&reply_head[0], &reply_magic, 4);
    std::memcpy(&reply_head[8], &call, 8);
    CHECK(raw.Send(2, reply_head, "") == UCS_OK);
    // And a well-formed request with the key: the only one handled.
    CHECK(raw.Send(1, RequestHead(kMagic, 10, kKey, 0), "ok") == UCS_OK);
    REQUIRE(Eventually([&] { return server.handled() == 1; }));
  }
  const DropCounts drops = server.messenger().drops();
  CHECK(drops.bad_key == 2);
  CHECK(drops.malformed == 4);
  CHECK(drops.unknown_call == 1);
  CHECK(server.handled() == 1);
  // The listener still serves a messenger with the key, once the key is let
  // go of the raw client's connection, which took it.
  server.messenger().ReleaseKey(kKey);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", server.port());
  REQUIRE(peer.ok());
  Reply reply = client->CallAndWait(*peer, 3, kKey, "after", {},
                                    absl::Now() + absl::Seconds(30));
  CHECK(reply.status.ok());
  CHECK(reply.header == "3:after");
}

TEST_CASE("a call unanswered by its deadline ends; its late reply is dropped") {
  Server server(/*echo=*/false);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", server.port());
  REQUIRE(peer.ok());
  Reply reply = client->CallAndWait(*peer, 1, kKey, "late", {},
                                    absl::Now() + absl::Milliseconds(200));
  CHECK(reply.status.code() == absl::StatusCode::kDeadlineExceeded);
  std::shared_ptr<Request> held = server.TakeHeld();
  REQUIRE(held != nullptr);
  server.messenger().Respond(held->peer, held->call, absl::OkStatus(),
                             "too late", {}, nullptr);
  CHECK(Eventually([&] { return client->drops().unknown_call == 1; }));

  // Cancel ends a call at once.
  Mutex mu;
  absl::Status status;
  bool done = false;
  const uint64_t call = client->Call(*peer, 1, kKey, "cancel me", {}, nullptr,
                                     absl::InfiniteFuture(), [&](Reply r) {
                                       MutexLock lock(&mu);
                                       status = r.status;
                                       done = true;
                                     });
  REQUIRE(Eventually([&] { return server.handled() == 2; }));
  client->Cancel(call);
  CHECK(Eventually([&] {
    MutexLock lock(&mu);
    return done;
  }));
  MutexLock lock(&mu);
  CHECK(status.code() == absl::StatusCode::kCancelled);
}

// Starts ucx_test_peer and reads its port.
struct Peer {
  pid_t pid = -1;
  int port = 0;
  FILE* out = nullptr;  // its standard output
  ~Peer() {
    if (out != nullptr) fclose(out);
  }
};
void StartPeer(const std::string& mode, Peer* peer) {
  const char* dir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  REQUIRE(dir != nullptr);
  REQUIRE(workspace != nullptr);
  const std::string binary =
      std::string(dir) + "/" + workspace + "/ps/ucx/ucx_test_peer";
  int out[2];
  REQUIRE(pipe(out) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const std::string mode_flag = "--mode=" + mode;
  char* argv[] = {const_cast<char*>(binary.c_str()),
                  const_cast<char*>(mode_flag.c_str()), nullptr};
  REQUIRE(posix_spawn(&peer->pid, binary.c_str(), &actions, nullptr, argv,
                      environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  peer->out = fdopen(out[0], "r");
  REQUIRE(peer->out != nullptr);
  REQUIRE(std::fscanf(peer->out, "port %d", &peer->port) == 1);
}

TEST_CASE("a peer killed with calls under way ends them with UNAVAILABLE") {
  const size_t size = GENERATE(10, 16 << 20);
  INFO("payload " << size);
  Peer server;
  StartPeer("hold", &server);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", server.port);
  REQUIRE(peer.ok());
  // Two calls the peer holds, then the kill.
  const std::string payload = Pattern(size, 3);
  Mutex mu;
  std::vector<absl::Status> ended;
  for (int i = 0; i < 2; ++i) {
    client->Call(*peer, 1, kKey, "held", {{payload.data(), payload.size()}},
                 nullptr, absl::Now() + absl::Seconds(60), [&](Reply r) {
                   MutexLock lock(&mu);
                   ended.push_back(r.status);
                 });
  }
  // The peer says when it holds each.
  for (int i = 1; i <= 2; ++i) {
    int held = 0;
    REQUIRE(std::fscanf(server.out, " held %d", &held) == 1);
    REQUIRE(held == i);
  }
  REQUIRE(kill(server.pid, SIGKILL) == 0);
  int wstatus = 0;
  REQUIRE(waitpid(server.pid, &wstatus, 0) == server.pid);
  REQUIRE(Eventually([&] {
    MutexLock lock(&mu);
    return ended.size() == 2;
  }));
  MutexLock lock(&mu);
  for (const absl::Status& status : ended) {
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kUnavailable);
  }
}

TEST_CASE(
    "a killed peer's restarted successor is reached by a new connection") {
  Peer first;
  StartPeer("echo", &first);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", first.port);
  REQUIRE(peer.ok());
  CHECK(client
            ->CallAndWait(*peer, 1, kKey, "a", {},
                          absl::Now() + absl::Seconds(30))
            .status.ok());
  REQUIRE(kill(first.pid, SIGKILL) == 0);
  waitpid(first.pid, nullptr, 0);
  Reply gone = client->CallAndWait(*peer, 1, kKey, "b", {},
                                   absl::Now() + absl::Seconds(60));
  CHECK(gone.status.code() == absl::StatusCode::kUnavailable);
  Peer second;
  StartPeer("echo", &second);
  auto again = client->Connect("127.0.0.1", second.port);
  REQUIRE(again.ok());
  Reply reply = client->CallAndWait(*again, 1, kKey, "c", {},
                                    absl::Now() + absl::Seconds(30));
  CHECK(reply.status.ok());
  CHECK(reply.header == "c");
  kill(second.pid, SIGKILL);
  waitpid(second.pid, nullptr, 0);
}

TEST_CASE("tcp's segments default to 1M unless the user set their size") {
  // Set by the user: left as they are (UCX's 8K send segment with a 256K
  // receive segment; 1M over 256K would not start).
  setenv("UCX_TCP_RX_SEG_SIZE", "256K", /*overwrite=*/1);
  unsetenv("UCX_TCP_TX_SEG_SIZE");
  {
    auto m = NewMessenger();
    CHECK(std::getenv("UCX_TCP_TX_SEG_SIZE") == nullptr);
    CHECK(std::string(std::getenv("UCX_TCP_RX_SEG_SIZE")) == "256K");
  }
  unsetenv("UCX_TCP_RX_SEG_SIZE");
  auto m = NewMessenger();
  REQUIRE(std::getenv("UCX_TCP_TX_SEG_SIZE") != nullptr);
  CHECK(std::string(std::getenv("UCX_TCP_TX_SEG_SIZE")) == "1M");
  CHECK(std::string(std::getenv("UCX_TCP_RX_SEG_SIZE")) == "1M");
}

TEST_CASE("bad arguments are refused with the reason") {
  MessengerOptions options;
  options.settings = {{"RNDV_THRESH", "not-a-size"}};
  auto bad = Messenger::Create(options);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("RNDV_THRESH=not-a-size") !=
        std::string::npos);

  auto m = NewMessenger();
  auto listen = m->Listen("no-such-host.invalid", 0, [](Request) {});
  CHECK(listen.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(listen.status().message().find("cannot resolve") != std::string::npos);
  // A name that resolves is as good as an address (a config names hosts).
  CHECK(m->Listen("localhost", 0, [](Request) {}).ok());
  CHECK(m->Connect("127.0.0.1", 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(m->Connect("no-such-host.invalid", 5000).status().code() ==
        absl::StatusCode::kInvalidArgument);
  Reply reply =
      m->CallAndWait(12345, 1, kKey, "", {}, absl::Now() + absl::Seconds(5));
  CHECK(reply.status.code() == absl::StatusCode::kUnavailable);
}

// The process's CPU time so far (every thread's).
double ProcessCpuSeconds() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Connections that never present a key (docs/RELIABILITY.md, Security
// 60-6): closed at the key deadline, and no more than max_unkeyed wait.
TEST_CASE("a connection without a key is closed at its deadline; few wait") {
  MessengerOptions options;
  options.transports = "tcp";
  options.key_deadline = absl::Milliseconds(500);
  options.max_unkeyed = 3;
  // Before the messenger, whose stopping tells peer_gone of every peer.
  Mutex mu;
  std::vector<uint64_t> gone;
  auto made = Messenger::Create(options);
  REQUIRE(made.ok());
  std::unique_ptr<Messenger> server = std::move(*made);
  auto port = server->Listen(
      "127.0.0.1", 0,
      [&](Request request) {
        server->Respond(request.peer, request.call, absl::OkStatus(), "", {},
                        nullptr);
      },
      /*require_key=*/true,
      [&](uint64_t peer) {
        MutexLock lock(&mu);
        gone.push_back(peer);
      });
  REQUIRE(port.ok());
  server->AcceptKey(kKey);

  SECTION("silent ones are closed; one that presents its key stays") {
    auto talker = NewMessenger();
    auto keyed = talker->Connect("127.0.0.1", *port);
    REQUIRE(keyed.ok());
    REQUIRE(talker
                ->CallAndWait(*keyed, 1, kKey, "h", {},
                              absl::Now() + absl::Seconds(30))
                .status.ok());
    auto quiet = NewMessenger();
    REQUIRE(quiet->Connect("127.0.0.1", *port).ok());
    // A stranger's key does not count as one.
    auto stranger = NewMessenger();
    auto wrong = stranger->Connect("127.0.0.1", *port);
    REQUIRE(wrong.ok());
    Key other = kKey;
    other[0] ^= 1;
    stranger->Call(*wrong, 1, other, "h", {}, nullptr,
                   absl::Now() + absl::Seconds(30), [](Reply) {});
    CHECK(Eventually([&] { return server->drops().unkeyed_closed == 2; },
                     absl::Seconds(20)));
    {
      MutexLock lock(&mu);
      CHECK(gone.size() == 2);
    }
    absl::SleepFor(absl::Seconds(1));  // past the deadline twice over
    CHECK(talker
              ->CallAndWait(*keyed, 1, kKey, "h", {},
                            absl::Now() + absl::Seconds(30))
              .status.ok());
    CHECK(server->drops().unkeyed_closed == 2);
    CHECK(server->drops().bad_key == 1);
  }
  SECTION("beyond max_unkeyed the longest waiting goes first") {
    std::vector<std::unique_ptr<Messenger>> quiet;
    for (int i = 0; i < 6; ++i) {
      quiet.push_back(NewMessenger());
      REQUIRE(quiet.back()->Connect("127.0.0.1", *port).ok());
    }
    // 6 silent connections, 3 may wait: 3 closed at once, the rest at their
    // deadline.
    CHECK(Eventually([&] { return server->drops().unkeyed_evicted == 3; },
                     absl::Seconds(20)));
    CHECK(Eventually([&] { return server->drops().unkeyed_closed == 3; },
                     absl::Seconds(20)));
    CHECK(server->drops().unkeyed_evicted == 3);
  }
}

// The claimed length before any buffer (docs/RELIABILITY.md, Security
// 60-5): a request with an accepted key longer than max_message_bytes is
// answered RESOURCE_EXHAUSTED without its data being read.
TEST_CASE("a request longer than max_message_bytes is refused unread") {
  MessengerOptions options;
  options.transports = "tcp";
  options.max_message_bytes = 1 << 20;
  auto made = Messenger::Create(options);
  REQUIRE(made.ok());
  std::unique_ptr<Messenger> server = std::move(*made);
  std::atomic<int> handled{0};
  auto port = server->Listen("127.0.0.1", 0, [&](Request request) {
    handled++;
    server->Respond(request.peer, request.call, absl::OkStatus(), "", {},
                    nullptr);
  });
  REQUIRE(port.ok());
  server->AcceptKey(kKey);
  auto client = NewMessenger();
  auto peer = client->Connect("127.0.0.1", *port);
  REQUIRE(peer.ok());
  const std::string fits = Pattern((1 << 20) - 100, 1);
  Reply ok =
      client->CallAndWait(*peer, 1, kKey, "h", {{fits.data(), fits.size()}},
                          absl::Now() + absl::Seconds(30));
  CHECK(ok.status.ok());
  // By rendezvous (4 MB) and just over the limit.
  for (size_t size : {size_t{4} << 20, size_t{1} << 20}) {
    const std::string large = Pattern(size, 2);
    Reply refused =
        client->CallAndWait(*peer, 1, kKey, "h", {{large.data(), large.size()}},
                            absl::Now() + absl::Seconds(30));
    CHECK(refused.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK(refused.status.message().find("more than the 1048576") !=
          absl::string_view::npos);
  }
  CHECK(handled == 1);
  CHECK(server->drops().too_large == 2);
  // The connection serves on.
  CHECK(client
            ->CallAndWait(*peer, 1, kKey, "h", {},
                          absl::Now() + absl::Seconds(30))
            .status.ok());
  CHECK(handled == 2);
}

TEST_CASE("idle messengers sleep, linked and after their peer has gone") {
  // Two messenger threads that spun would take about two seconds of CPU
  // a second on two cores; sleeping ones take next to none.
  Server server(/*echo=*/true, "tcp");
  {
    auto client = NewMessenger("tcp");
    auto peer = client->Connect("127.0.0.1", server.port());
    REQUIRE(peer.ok());
    Reply reply = client->CallAndWait(*peer, 7, kKey, "h", {},
                                      absl::Now() + absl::Seconds(30));
    REQUIRE(reply.status.ok());
    const double before = ProcessCpuSeconds();
    absl::SleepFor(absl::Seconds(1));
    CHECK(ProcessCpuSeconds() - before < 0.3);
  }
  const double before = ProcessCpuSeconds();
  absl::SleepFor(absl::Seconds(1));
  CHECK(ProcessCpuSeconds() - before < 0.3);
}

}  // namespace
}  // namespace ucx
}  // namespace ps
}  // namespace psgd
