// The attacks of docs/RELIABILITY.md's "Security" table, run against a real
// ps_server by tests/security_attacks_test.sh (as another uid where the test
// runs as root). Each subcommand is one attack; it prints what the server
// answered, one line per call, and exits 0 when every answer is the refusal
// the table promises (1 otherwise, 2 for bad flags).
//
//   security_attacker --address=A --cluster=C rpcs
//       every RPC without the token (Initialize with a run directory,
//       Shutdown, Rollback, Checkpoint, Join, Push, Leave, LeaseData,
//       ListCheckpoints, Pull, Status): UNAUTHENTICATED, each.
//   ... --token_file=F init
//       (a member) initialises the shard: variable "w", 256 floats of 0.5.
//   ... --token_file=F run_dir --run_dir=D
//       (a member) an Initialize naming run directory D (already
//       initialised: the answer is OK, the directory must be ignored).
//   ... --token_file=F shm_unsealed
//       pushes through memfds the server must not map: one without seals,
//       then shrunk; an O_PATH descriptor of --victim=V. FAILED_PRECONDITION
//       each, naming no file; and a sealed region cannot be shrunk.
//   ... --token_file=F shm_race --victim=V
//       150 pushes while a thread flips the named descriptor between a real
//       region and an O_PATH descriptor of V: every answer is OK or a
//       refusal that names no file and no size of V's.
//   ... --token_file=F shm_flip
//       200 pushes of finite gradients through a real region while a thread
//       writes NaN into it: afterwards every weight is finite.
//   ... flood --megabytes=M --count=K
//       K pushes of M MB each, without the token: UNAUTHENTICATED, each.
//   ... --token_file=F weights
//       prints the shard's step and whether every weight is finite, and
//       the sum of the weights.
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/security.h"
#include "proto/ps.grpc.pb.h"
#include "ps/wire/shared_memory.h"

ABSL_FLAG(std::string, address, "", "The server, host:port.");
ABSL_FLAG(std::string, cluster, "", "The cluster's name.");
ABSL_FLAG(std::string, token_file, "", "The token (a member); empty: none.");
ABSL_FLAG(std::string, run_dir, "", "run_dir: the directory to name.");
ABSL_FLAG(std::string, victim, "", "A file the attacker cannot read.");
ABSL_FLAG(int, megabytes, 100, "flood: each push's size.");
ABSL_FLAG(int, count, 8, "flood: pushes.");
ABSL_FLAG(
    std::string, method, "ApplyDecisions",
    "flood_entries: ApplyDecisions or Initialize, the method whose repeated "
    "field (decisions, variables) the request fills.");

namespace psgd {
namespace {

namespace wire = ps::wire;

constexpr int kElements = 256;
// What a worker's region for "w" takes: the header, then the gradient.
constexpr int64_t kRegionBytes =
    ps::kSharedHeaderBytes + kElements * sizeof(float);

std::unique_ptr<wire::ParameterServer::Stub> stub;
std::shared_ptr<grpc::Channel> channel;
bool all_refused = true;

std::string CodeName(const grpc::Status& s) {
  static const char* kNames[] = {"OK",
                                 "CANCELLED",
                                 "UNKNOWN",
                                 "INVALID_ARGUMENT",
                                 "DEADLINE",
                                 "NOT_FOUND",
                                 "ALREADY_EXISTS",
                                 "PERMISSION_DENIED",
                                 "EXHAUSTED",
                                 "FAILED_PRECONDITION",
                                 "ABORTED",
                                 "OUT_OF_RANGE",
                                 "UNIMPLEMENTED",
                                 "INTERNAL",
                                 "UNAVAILABLE",
                                 "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  const int c = s.error_code();
  return c >= 0 && c <= 16 ? kNames[c] : std::to_string(c);
}

// Prints the answer; `expected`: the code the attack must get.
void Expect(const std::string& what, const grpc::Status& s,
            grpc::StatusCode expected) {
  std::printf("%s: %s %s\n", what.c_str(), CodeName(s).c_str(),
              s.error_message().c_str());
  if (s.error_code() != expected) all_refused = false;
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
}

void Float32(const std::string& name, const std::vector<float>& values,
             wire::TensorData* t) {
  t->mutable_spec()->set_name(name);
  t->mutable_spec()->add_shape(static_cast<int64_t>(values.size()));
  t->set_dtype(wire::DT_FLOAT32);
  t->mutable_spec()->set_kind(wire::PARAMETER);
  t->set_data(values.data(), values.size() * sizeof(float));
}

template <typename Request, typename Response, typename Call>
grpc::Status Unary(Call call, Request request) {
  request.set_cluster(absl::GetFlag(FLAGS_cluster));
  Response response;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  return (stub.get()->*call)(&ctx, request, &response);
}

int Rpcs() {
  const auto U = grpc::StatusCode::UNAUTHENTICATED;
  wire::InitializeRequest init;
  Float32("w", std::vector<float>(kElements, 9.0f), init.add_variables());
  init.set_run_dir("/tmp");
  Expect("Initialize",
         Unary<wire::InitializeRequest, wire::InitializeResponse>(
             &wire::ParameterServer::Stub::Initialize, init),
         U);
  wire::ShutdownRequest shutdown;
  shutdown.set_reason("a stranger says so");
  Expect("Shutdown",
         Unary<wire::ShutdownRequest, wire::ShutdownResponse>(
             &wire::ParameterServer::Stub::Shutdown, shutdown),
         U);
  wire::RollbackRequest rollback;
  rollback.set_label(0);
  Expect("Rollback",
         Unary<wire::RollbackRequest, wire::RollbackResponse>(
             &wire::ParameterServer::Stub::Rollback, rollback),
         U);
  wire::CheckpointRequest checkpoint;
  checkpoint.set_label(1 << 30);
  checkpoint.set_now(true);
  Expect("Checkpoint",
         Unary<wire::CheckpointRequest, wire::CheckpointResponse>(
             &wire::ParameterServer::Stub::Checkpoint, checkpoint),
         U);
  wire::JoinRequest join;
  join.set_worker_id(0);
  Expect("Join",
         Unary<wire::JoinRequest, wire::MembershipResponse>(
             &wire::ParameterServer::Stub::Join, join),
         U);
  wire::PushRequest push;
  push.set_worker_id(0);
  Float32("w", std::vector<float>(kElements, 1e30f), push.add_gradients());
  Expect("Push",
         Unary<wire::PushRequest, wire::PushResponse>(
             &wire::ParameterServer::Stub::Push, push),
         U);
  wire::LeaveRequest leave;
  leave.set_worker_id(0);
  Expect("Leave",
         Unary<wire::LeaveRequest, wire::MembershipResponse>(
             &wire::ParameterServer::Stub::Leave, leave),
         U);
  wire::LeaseDataRequest lease;
  lease.set_worker_id(0);
  Expect("LeaseData",
         Unary<wire::LeaseDataRequest, wire::LeaseDataResponse>(
             &wire::ParameterServer::Stub::LeaseData, lease),
         U);
  Expect("ListCheckpoints",
         Unary<wire::ListCheckpointsRequest, wire::ListCheckpointsResponse>(
             &wire::ParameterServer::Stub::ListCheckpoints,
             wire::ListCheckpointsRequest()),
         U);
  wire::PullRequest pull;
  pull.set_worker_id(-1);
  Expect("Pull",
         Unary<wire::PullRequest, wire::PullResponse>(
             &wire::ParameterServer::Stub::Pull, pull),
         U);
  Expect("Status",
         Unary<wire::StatusRequest, wire::StatusResponse>(
             &wire::ParameterServer::Stub::Status, wire::StatusRequest()),
         U);
  return all_refused ? 0 : 1;
}

int Init() {
  wire::InitializeRequest init;
  Float32("w", std::vector<float>(kElements, 0.5f), init.add_variables());
  Expect("Initialize",
         Unary<wire::InitializeRequest, wire::InitializeResponse>(
             &wire::ParameterServer::Stub::Initialize, init),
         grpc::StatusCode::OK);
  wire::JoinRequest join;
  join.set_worker_id(0);
  Expect("Join",
         Unary<wire::JoinRequest, wire::MembershipResponse>(
             &wire::ParameterServer::Stub::Join, join),
         grpc::StatusCode::OK);
  return all_refused ? 0 : 1;
}

int RunDir() {
  wire::InitializeRequest init;
  Float32("w", std::vector<float>(kElements, 0.5f), init.add_variables());
  init.set_run_dir(absl::GetFlag(FLAGS_run_dir));
  // Taken (the variables match); the directory must not be.
  Expect("Initialize naming " + absl::GetFlag(FLAGS_run_dir),
         Unary<wire::InitializeRequest, wire::InitializeResponse>(
             &wire::ParameterServer::Stub::Initialize, init),
         grpc::StatusCode::OK);
  wire::StatusResponse status;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  wire::StatusRequest request;
  request.set_cluster(absl::GetFlag(FLAGS_cluster));
  grpc::Status s = stub->Status(&ctx, request, &status);
  std::printf("the server's run directory: '%s'\n", status.run_dir().c_str());
  return s.ok() && status.run_dir() != absl::GetFlag(FLAGS_run_dir) &&
                 all_refused
             ? 0
             : 1;
}

// A push of worker 0 whose gradient lies in the region `ref` names.
grpc::Status SharedPush(const wire::SharedMemory& ref, int64_t step,
                        wire::PushResponse* response) {
  wire::PushRequest push;
  push.set_cluster(absl::GetFlag(FLAGS_cluster));
  push.set_worker_id(0);
  push.set_step(step);
  *push.mutable_shared_memory() = ref;
  wire::TensorData* t = push.add_gradients();
  t->mutable_spec()->set_name("w");
  t->mutable_spec()->add_shape(kElements);
  t->set_dtype(wire::DT_FLOAT32);
  t->mutable_spec()->set_kind(wire::PARAMETER);
  t->mutable_shared()->set_offset(ps::kSharedHeaderBytes);
  t->mutable_shared()->set_size(kElements * sizeof(float));
  grpc::ClientContext ctx;
  Deadline(&ctx);
  return stub->Push(&ctx, push, response);
}

// The shard's step now (async: a worker pushes once per step).
int64_t CurrentStep() {
  wire::StatusRequest request;
  request.set_cluster(absl::GetFlag(FLAGS_cluster));
  wire::StatusResponse status;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  return stub->Status(&ctx, request, &status).ok() ? status.step() : 0;
}

// The refusal names no file (no '/') and not the victim's size (as a
// number of its own: a pid may hold its digits).
bool Discreet(const grpc::Status& s, int64_t victim_size) {
  const std::string& m = s.error_message();
  if (m.find('/') != std::string::npos) return false;
  if (victim_size <= 0) return true;
  const std::string size = std::to_string(victim_size);
  for (size_t at = m.find(size); at != std::string::npos;
       at = m.find(size, at + 1)) {
    const bool digit_before = at > 0 && std::isdigit(m[at - 1]);
    const size_t end = at + size.size();
    const bool digit_after = end < m.size() && std::isdigit(m[end]);
    if (!digit_before && !digit_after) return false;
  }
  return true;
}

int64_t VictimSize() {
  struct stat st;
  const std::string v = absl::GetFlag(FLAGS_victim);
  return !v.empty() && stat(v.c_str(), &st) == 0 ? st.st_size : -1;
}

// A region with the right header but none of the seals.
int UnsealedRegion(wire::SharedMemory* ref) {
  auto region = ps::SharedRegion::Create(kRegionBytes);
  if (!region.ok()) return -1;
  (*region)->Describe(ref);
  const int fd = memfd_create(ps::kSharedMemfdName, MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, kRegionBytes) != 0) return -1;
  void* data =
      mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::memcpy(data, (*region)->data(), ps::kSharedHeaderBytes);
  munmap(data, kRegionBytes);
  ref->set_fd(fd);
  return fd;
}

int ShmUnsealed() {
  const int64_t victim_size = VictimSize();
  wire::PushResponse response;
  wire::SharedMemory ref;
  const int fd = UnsealedRegion(&ref);
  if (fd < 0) return 2;
  grpc::Status s = SharedPush(ref, 0, &response);
  Expect("unsealed memfd", s, grpc::StatusCode::FAILED_PRECONDITION);
  if (!Discreet(s, victim_size)) all_refused = false;
  // Shrunk after the (refused) attach: nothing of it is mapped.
  if (ftruncate(fd, 0) != 0) return 2;
  s = SharedPush(ref, 0, &response);
  Expect("unsealed memfd, shrunk", s, grpc::StatusCode::FAILED_PRECONDITION);
  // An O_PATH descriptor of a file this user cannot read.
  if (victim_size >= 0) {
    const int path_fd =
        open(absl::GetFlag(FLAGS_victim).c_str(), O_PATH | O_CLOEXEC);
    if (path_fd < 0) return 2;
    ref.set_fd(path_fd);
    s = SharedPush(ref, 0, &response);
    Expect("O_PATH descriptor of the victim", s,
           grpc::StatusCode::FAILED_PRECONDITION);
    if (!Discreet(s, victim_size)) all_refused = false;
  }
  // A real region: taken; and its size cannot change.
  auto region = ps::SharedRegion::Create(kRegionBytes);
  if (!region.ok()) return 2;
  (*region)->Describe(&ref);
  std::memset((*region)->data() + ps::kSharedHeaderBytes, 0,
              kElements * sizeof(float));
  Expect("a sealed region", SharedPush(ref, CurrentStep(), &response),
         grpc::StatusCode::OK);
  const bool shrunk = ftruncate(ref.fd(), 64) == 0;
  std::printf("ftruncate of a sealed region: %s\n",
              shrunk ? "allowed" : "refused");
  if (shrunk) all_refused = false;
  return all_refused ? 0 : 1;
}

int ShmRace() {
  const int64_t victim_size = VictimSize();
  if (victim_size < 0) return 2;
  // The number the requests name, into which a thread flips either `real`
  // (a copy of the current region's descriptor) or `bait` (an O_PATH
  // descriptor of the victim). Each push names a fresh region (a new
  // nonce), so the server takes the descriptor again every time.
  const int named = dup(0);
  const int real = dup(0);
  const int bait =
      open(absl::GetFlag(FLAGS_victim).c_str(), O_PATH | O_CLOEXEC);
  if (named < 0 || real < 0 || bait < 0) return 2;
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    bool b = false;
    while (!stop) {
      dup2(b ? real : bait, named);
      b = !b;
    }
  });
  int ok = 0, refused = 0;
  for (int i = 0; i < 150; ++i) {
    auto region = ps::SharedRegion::Create(kRegionBytes);
    if (!region.ok()) return 2;
    wire::SharedMemory ref;
    (*region)->Describe(&ref);
    std::memset((*region)->data() + ps::kSharedHeaderBytes, 0,
                kElements * sizeof(float));
    dup2(ref.fd(), real);
    ref.set_fd(named);
    wire::PushResponse response;
    grpc::Status s = SharedPush(ref, CurrentStep(), &response);
    if (s.ok()) {
      ++ok;
    } else if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
               s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      if (refused++ == 0) {
        std::printf("first refusal: %s\n", s.error_message().c_str());
      }
      if (!Discreet(s, victim_size)) {
        std::printf("a refusal names the victim: %s\n",
                    s.error_message().c_str());
        all_refused = false;
      }
    } else {
      std::printf("unexpected: %s %s\n", CodeName(s).c_str(),
                  s.error_message().c_str());
      all_refused = false;
    }
  }
  stop = true;
  flipper.join();
  std::printf("150 pushes: %d taken, %d refused\n", ok, refused);
  return all_refused ? 0 : 1;
}

int ShmFlip() {
  auto region = ps::SharedRegion::Create(kRegionBytes);
  if (!region.ok()) return 2;
  wire::SharedMemory ref;
  (*region)->Describe(&ref);
  float* g =
      reinterpret_cast<float*>((*region)->data() + ps::kSharedHeaderBytes);
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    // Finite for a while, NaN for a while: some pushes find the region
    // finite all through their copy (taken), others NaN (refused), and a
    // server that read the region again after its check would apply NaN.
    const float nan = std::nanf("");
    while (!stop) {
      for (int i = 0; i < kElements; ++i) g[i] = 1e-3f;
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      for (int i = 0; i < kElements; ++i) g[i] = nan;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  int ok = 0, refused = 0;
  for (int i = 0; i < 200; ++i) {
    wire::PushResponse response;
    grpc::Status s = SharedPush(ref, CurrentStep(), &response);
    s.ok() ? ++ok : ++refused;
  }
  stop = true;
  flipper.join();
  std::printf("200 pushes while NaN flips in: %d taken, %d refused\n", ok,
              refused);
  return 0;
}

int Flood() {
  // Raw bytes of the size a stranger chooses (a PushRequest's field 4,
  // one huge gradient), straight to the method.
  grpc::GenericStub generic(channel);
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_megabytes))
                       << 20;
  std::string payload;
  payload.reserve(bytes + 16);
  payload.push_back(static_cast<char>((4 << 3) | 2));
  size_t n = bytes;
  while (n >= 0x80) {
    payload.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  payload.push_back(static_cast<char>(n));
  payload.resize(payload.size() + bytes, 'x');
  for (int i = 0; i < absl::GetFlag(FLAGS_count); ++i) {
    grpc::Slice slice(payload);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    grpc::Status result;
    std::atomic<bool> done{false};
    generic.UnaryCall(&ctx, "/psgd.ps.wire.ParameterServer/Push",
                      grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        result = s;
                        done = true;
                      });
    while (!done) absl::SleepFor(absl::Milliseconds(5));
    Expect(absl::StrCat("push ", i + 1, " of ", bytes >> 20, " MB"), result,
           grpc::StatusCode::UNAUTHENTICATED);
  }
  return all_refused ? 0 : 1;
}

// One raw call of `bytes` to `method`, waited for; its status.
grpc::Status RawCall(const std::string& method, const std::string& bytes) {
  grpc::GenericStub generic(channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  grpc::Status result;
  std::atomic<bool> done{false};
  generic.UnaryCall(&ctx, "/psgd.ps.wire.ParameterServer/" + method,
                    grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      result = s;
                      done = true;
                    });
  while (!done) absl::SleepFor(absl::Milliseconds(5));
  return result;
}

int FloodEntries() {
  // --megabytes of empty entries of the method's repeated field (2 bytes
  // each on the wire, about a hundred times that parsed): a stranger's
  // ApplyDecisions or Initialize, --count times.
  const std::string method = absl::GetFlag(FLAGS_method);
  const int field = method == "Initialize" ? 2 : 3;
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_megabytes))
                       << 20;
  std::string payload;
  payload.reserve(bytes);
  while (payload.size() + 2 <= bytes) {
    payload.push_back(static_cast<char>((field << 3) | 2));
    payload.push_back('\0');
  }
  for (int i = 0; i < absl::GetFlag(FLAGS_count); ++i) {
    Expect(absl::StrCat(method, " ", i + 1, " of ", bytes >> 20,
                        " MB of empty entries"),
           RawCall(method, payload), grpc::StatusCode::UNAUTHENTICATED);
  }
  return all_refused ? 0 : 1;
}

int ForgeDecisions() {
  // A member (the cluster token, a worker's) sends a follower decisions
  // shard 0 never made: a sync step with lr_scale NaN, a push that never
  // existed, 2,000 DROPPED at once, LEFT for a live worker, N of 2^31 - 1.
  // Each must be refused for want of the servers' peer token.
  std::vector<std::pair<std::string, wire::ApplyDecisionsRequest>> forged;
  auto add = [&](const std::string& what) -> wire::ApplyDecisionsRequest& {
    forged.emplace_back(what, wire::ApplyDecisionsRequest());
    wire::ApplyDecisionsRequest& r = forged.back().second;
    r.set_cluster(absl::GetFlag(FLAGS_cluster));
    r.set_generation(1);
    return r;
  };
  auto sync_step = [&](const std::string& what) {
    wire::Decision* d = add(what).add_decisions();
    d->set_seq(1);
    wire::Decision::SyncStep* s = d->mutable_sync_step();
    s->add_workers(0);
    s->add_push_ids(1);
    s->set_lr_scale(1);
    return s;
  };
  sync_step("a step of lr_scale NaN")->set_lr_scale(std::nan(""));
  sync_step("a push that never existed")->set_push_ids(0, 0x7fffffffffffULL);
  wire::ApplyDecisionsRequest& dropped = add("2,000 DROPPED");
  for (int i = 0; i < 2000; ++i) {
    wire::Decision* d = dropped.add_decisions();
    d->set_seq(i + 1);
    d->mutable_dropped()->set_worker(0);
    d->mutable_dropped()->set_push_id(i);
    d->mutable_dropped()->set_reason(wire::Decision::Dropped::STALE);
  }
  wire::Decision* left = add("LEFT for a live worker").add_decisions();
  left->set_seq(1);
  left->mutable_left()->set_worker(0);
  sync_step("N of 2^31 - 1")->set_replicas_next(2147483647);
  for (const auto& [what, request] : forged) {
    Expect(absl::StrCat("ApplyDecisions: ", what),
           RawCall("ApplyDecisions", request.SerializeAsString()),
           grpc::StatusCode::UNAUTHENTICATED);
  }
  return all_refused ? 0 : 1;
}

int Weights() {
  wire::PullRequest pull;
  pull.set_cluster(absl::GetFlag(FLAGS_cluster));
  pull.set_worker_id(-1);
  wire::PullResponse response;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  grpc::Status s = stub->Pull(&ctx, pull, &response);
  if (!s.ok()) {
    std::printf("pull: %s %s\n", CodeName(s).c_str(),
                s.error_message().c_str());
    return 1;
  }
  bool finite = true;
  double sum = 0;
  for (const wire::TensorData& t : response.variables()) {
    std::vector<float> v(t.data().size() / sizeof(float));
    std::memcpy(v.data(), t.data().data(), v.size() * sizeof(float));
    for (float x : v) {
      finite = finite && std::isfinite(x);
      sum += x;
    }
  }
  std::printf("step %lld finite %d sum %.6f\n",
              static_cast<long long>(response.step()), finite ? 1 : 0, sum);
  return finite ? 0 : 1;
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2 || absl::GetFlag(FLAGS_address).empty()) {
    std::fprintf(stderr,
                 "usage: security_attacker --address=A --cluster=C "
                 "[--token_file=F] ATTACK\n");
    return 2;
  }
  psgd::ClientCredentials credentials;
  if (const std::string f = absl::GetFlag(FLAGS_token_file); !f.empty()) {
    absl::StatusOr<std::string> token = psgd::ReadTokenFile(f);
    if (!token.ok()) {
      std::fprintf(stderr, "%s\n", token.status().ToString().c_str());
      return 2;
    }
    credentials.token = *token;
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxSendMessageSize(-1);
  channel_args.SetMaxReceiveMessageSize(-1);
  psgd::channel = psgd::CreateChannel(absl::GetFlag(FLAGS_address), credentials,
                                      channel_args);
  psgd::stub = psgd::ps::wire::ParameterServer::NewStub(psgd::channel);
  const std::string attack = args[1];
  if (attack == "rpcs") return psgd::Rpcs();
  if (attack == "init") return psgd::Init();
  if (attack == "run_dir") return psgd::RunDir();
  if (attack == "shm_unsealed") return psgd::ShmUnsealed();
  if (attack == "shm_race") return psgd::ShmRace();
  if (attack == "shm_flip") return psgd::ShmFlip();
  if (attack == "flood") return psgd::Flood();
  if (attack == "flood_entries") return psgd::FloodEntries();
  if (attack == "weights") return psgd::Weights();
  if (attack == "forge_decisions") return psgd::ForgeDecisions();
  std::fprintf(stderr, "unknown attack '%s'\n", attack.c_str());
  return 2;
}
