#include "ps/client/grpc_channel.h"

#include <grpc/grpc.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "ps/wire/shared_memory.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_zero_copy.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

// The full names of the methods called through the generic stub.
constexpr char kPushMethod[] = "/psgd.ps.wire.ParameterServer/Push";
constexpr char kPullMethod[] = "/psgd.ps.wire.ParameterServer/Pull";
constexpr char kCommitMethod[] = "/psgd.ps.wire.ParameterServer/Commit";
constexpr char kDecidePushMethod[] = "/psgd.ps.wire.ParameterServer/DecidePush";

// How a call ends, shared with gRPC's callback (which may run after the
// waiter has woken up, so the waiter must not own it alone).
struct Outcome {
  Notification done;
  grpc::Status status;  // written before `done`, read after

  static std::function<void(grpc::Status)> Callback(
      const std::shared_ptr<Outcome>& outcome) {
    return [outcome](grpc::Status s) {
      outcome->status = std::move(s);
      outcome->done.Notify();
    };
  }
};

// A unary call through the generated stub.
class GrpcCall final : public ShardCall {
 public:
  explicit GrpcCall(absl::Time deadline)
      : outcome_(std::make_shared<Outcome>()) {
    context_.set_deadline(absl::ToChronoTime(deadline));
  }
  // gRPC uses the context until the call ends.
  ~GrpcCall() override { outcome_->done.WaitForNotification(); }

  grpc::ClientContext* context() { return &context_; }
  std::function<void(grpc::Status)> Callback() {
    return Outcome::Callback(outcome_);
  }

  absl::Status Await() override {
    outcome_->done.WaitForNotification();
    return FromGrpcStatus(outcome_->status);
  }

 private:
  grpc::ClientContext context_;
  const std::shared_ptr<Outcome> outcome_;
};

// A health check: SERVING or not, once it has ended.
class HealthCall final : public ShardCall {
 public:
  HealthCall(absl::Time deadline, bool* serving)
      : call_(deadline), serving_(serving) {}

  grpc::ClientContext* context() { return call_.context(); }
  std::function<void(grpc::Status)> Callback() { return call_.Callback(); }
  const grpc::health::v1::HealthCheckRequest* request() { return &request_; }
  grpc::health::v1::HealthCheckResponse* response() { return &response_; }

  absl::Status Await() override {
    absl::Status s = call_.Await();
    if (s.ok()) {
      *serving_ =
          response_.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    }
    return s;
  }

 private:
  // Declared first, so that they are destroyed after call_ (which waits
  // for gRPC).
  const grpc::health::v1::HealthCheckRequest request_;  // all services
  grpc::health::v1::HealthCheckResponse response_;
  GrpcCall call_;
  bool* const serving_;
};

}  // namespace

// Pushes and pulls as raw bytes, the messages' buffers kept from call to
// call; with shared memory (wire { shared_memory }), the tensors through a
// region of this exchange's (ps/wire/shared_memory.h) once a pull has shown
// that the server can open it.
class GrpcShardChannel::Exchange final : public ShardExchange {
 public:
  explicit Exchange(GrpcShardChannel* channel) : channel_(channel) {}
  ~Exchange() override {
    if (outcome_ != nullptr) outcome_->done.WaitForNotification();
  }

  void StartPush(const wire::PushRequest& header,
                 absl::Span<const TensorBytes> gradients,
                 std::shared_ptr<const void> in_use, absl::Time deadline,
                 PushMethod method) override {
    shared_push_ = shared_pull_ = false;
    push_method_ =
        method == PushMethod::kDecidePush ? kDecidePushMethod : kPushMethod;
    if (channel_->shared_state() == SharedState::kConfirmed &&
        PushShared(header, gradients)) {
      deadline_ = deadline;
      Start(push_method_, deadline);
      return;
    }
    request_ =
        EncodeWithTensors(header, wire::PushRequest::kGradientsFieldNumber,
                          gradients, std::move(in_use));
    Start(push_method_, deadline);
  }

  void StartPull(const wire::PullRequest& request,
                 absl::Time deadline) override {
    shared_push_ = shared_pull_ = false;
    const wire::PullRequest* send = &request;
    wire::PullRequest with_region;
    const SharedState state = channel_->shared_state();
    if ((state == SharedState::kUnknown || state == SharedState::kConfirmed) &&
        EnsureRegion(pull_bytes_)) {
      with_region = request;
      region_->Describe(with_region.mutable_shared_memory());
      send = &with_region;
      shared_pull_ = true;
    }
    bool own_buffer;
    grpc::Status s = grpc::SerializationTraits<wire::PullRequest>::Serialize(
        *send, &request_, &own_buffer);
    if (!s.ok()) {
      outcome_ = std::make_shared<Outcome>();
      Outcome::Callback(outcome_)(std::move(s));
      return;
    }
    Start(kPullMethod, deadline);
  }

  void StartCommit(const wire::CommitRequest& request,
                   absl::Time deadline) override {
    shared_push_ = shared_pull_ = false;
    bool own_buffer;
    grpc::Status s = grpc::SerializationTraits<wire::CommitRequest>::Serialize(
        request, &request_, &own_buffer);
    if (!s.ok()) {
      outcome_ = std::make_shared<Outcome>();
      Outcome::Callback(outcome_)(std::move(s));
      return;
    }
    Start(kCommitMethod, deadline);
  }

  absl::Status Await() override {
    outcome_->done.WaitForNotification();
    channel_->sent_bytes_.fetch_add(
        static_cast<int64_t>(request_.Length()) + shared_sent_,
        std::memory_order_relaxed);
    channel_->shared_sent_bytes_.fetch_add(shared_sent_,
                                           std::memory_order_relaxed);
    shared_sent_ = 0;
    channel_->received_bytes_.fetch_add(
        static_cast<int64_t>(response_.Length()), std::memory_order_relaxed);
    // A push's request references the gradients: let go of them.
    request_.Clear();
    {
      MutexLock lock(&cancel_mu_);
      cancellable_ = nullptr;
    }
    context_.reset();
    const grpc::Status status = std::move(outcome_->status);
    outcome_.reset();
    if (status.ok()) return absl::OkStatus();
    absl::Status s = FromGrpcStatus(status);
    if (shared_push_ && IsSharedMemoryRefusal(s)) {
      // The server cannot open the region after all (it restarted on
      // another machine at this address, say): the same push as bytes,
      // from the region, where the gradients are.
      channel_->RefuseShared(s.message());
      shared_push_ = false;
      request_ = EncodeWithTensors(push_header_,
                                   wire::PushRequest::kGradientsFieldNumber,
                                   shared_tensors_, region_);
      region_.reset();
      Start(push_method_, deadline_);
      return Await();
    }
    // The server may still read or write the region for the call that
    // failed (its deadline passed while the server served it): the next
    // call takes a new one.
    if (shared_push_ || shared_pull_) region_.reset();
    return s;
  }

  void Cancel() override {
    MutexLock lock(&cancel_mu_);
    if (cancellable_ != nullptr) cancellable_->TryCancel();
  }

  absl::Status ReadPush(wire::PushResponse* response) override {
    grpc::Status parsed =
        grpc::SerializationTraits<wire::PushResponse>::Deserialize(&response_,
                                                                   response);
    response_.Clear();
    return FromGrpcStatus(parsed);
  }

  absl::Status ReadPull(PulledVersion* version,
                        ShardAssembler* assembler) override {
    int64_t wait_micros = 0;
    int64_t shared_bytes = 0;
    SharedPullReply reply;
    absl::Status s = DecodePullResponse(
        &response_, &version->step, &wait_micros,
        [&](const TensorBytes& t, size_t bytes) {
          return assembler->Destination(t, bytes);
        },
        &version->generation,
        [&](const TensorBytes& t) {
          if (shared_pull_) shared_bytes += static_cast<int64_t>(t.data.size());
          return assembler->Done(t);
        },
        &version->learning_rate,
        shared_pull_ ? absl::string_view(region_->data(), region_->size())
                     : absl::string_view(),
        &reply, channel_->copy_pool_.get());
    response_.Clear();
    version->wait = absl::Microseconds(wait_micros);
    if (!s.ok()) return s;
    if (shared_pull_) {
      if (!reply.refused.empty()) {
        channel_->RefuseShared(reply.refused);
        region_.reset();
      } else {
        channel_->ConfirmShared();
        if (reply.needed > 0) {
          pull_bytes_ = reply.needed;  // the next pull's region
        } else {
          channel_->received_bytes_.fetch_add(shared_bytes,
                                              std::memory_order_relaxed);
          channel_->shared_received_bytes_.fetch_add(shared_bytes,
                                                     std::memory_order_relaxed);
        }
      }
    }
    return s;
  }

 private:
  // A region of at least `bytes` bytes in region_ (a new one when the
  // current one is smaller); false (and none) when none can be made.
  bool EnsureRegion(int64_t bytes) {
    bytes = std::max(bytes, kSharedHeaderBytes);
    if (region_ != nullptr && region_->size() >= bytes) return true;
    region_.reset();
    absl::StatusOr<std::unique_ptr<SharedRegion>> region =
        SharedRegion::Create(bytes);
    if (!region.ok()) {
      channel_->RefuseShared(region.status().message());
      return false;
    }
    region_ = *std::move(region);
    return true;
  }

  // Copies the gradients into the region and serializes the push that names
  // them into request_; false when no region can be made.
  bool PushShared(const wire::PushRequest& header,
                  absl::Span<const TensorBytes> gradients) {
    SharedLayout layout;
    std::vector<int64_t> offsets;
    for (const TensorBytes& t : gradients) {
      offsets.push_back(
          t.no_gradient ? 0 : layout.Add(static_cast<int64_t>(t.data.size())));
    }
    if (!EnsureRegion(layout.size())) return false;
    pull_bytes_ = std::max(pull_bytes_, layout.size());
    push_header_ = header;
    wire::PushRequest request = header;
    region_->Describe(request.mutable_shared_memory());
    shared_tensors_.assign(gradients.begin(), gradients.end());
    // The copy on the channel's threads, a part of the bytes each.
    std::vector<int64_t> bytes;
    for (const TensorBytes& t : gradients) {
      bytes.push_back(t.no_gradient ? 0 : static_cast<int64_t>(t.data.size()));
    }
    ParallelForSpans(channel_->copy_pool_.get(), bytes, kMinBulkPartBytes,
                     [&](size_t k, int64_t begin, int64_t end) {
                       std::memcpy(region_->data() + offsets[k] + begin,
                                   gradients[k].data.data() + begin,
                                   static_cast<size_t>(end - begin));
                     });
    for (size_t k = 0; k < gradients.size(); ++k) {
      const TensorBytes& t = gradients[k];
      SharedTensorToProto(t, offsets[k], request.add_gradients());
      if (t.no_gradient) continue;
      shared_tensors_[k].data =
          absl::string_view(region_->data() + offsets[k], t.data.size());
      shared_sent_ += static_cast<int64_t>(t.data.size());
    }
    bool own_buffer;
    grpc::Status s = grpc::SerializationTraits<wire::PushRequest>::Serialize(
        request, &request_, &own_buffer);
    if (!s.ok()) {
      shared_sent_ = 0;
      return false;
    }
    shared_push_ = true;
    return true;
  }

  void Start(const std::string& method, absl::Time deadline) {
    context_ = std::make_unique<grpc::ClientContext>();
    context_->set_deadline(absl::ToChronoTime(deadline));
    outcome_ = std::make_shared<Outcome>();
    channel_->raw_->UnaryCall(context_.get(), method, {}, &request_, &response_,
                              Outcome::Callback(outcome_));
    MutexLock lock(&cancel_mu_);
    cancellable_ = context_.get();
  }

  GrpcShardChannel* const channel_;  // Not owned.
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  // The call under way (null: none).
  std::unique_ptr<grpc::ClientContext> context_;
  std::shared_ptr<Outcome> outcome_;
  // context_ while its call is under way, for Cancel from another thread
  // (TryCancel is thread-safe; the context must outlive it).
  Mutex cancel_mu_;
  grpc::ClientContext* cancellable_ ABSL_GUARDED_BY(cancel_mu_) = nullptr;

  // Shared memory: this exchange's region (shared with gRPC's slices when a
  // refused push is sent again as bytes from it), the size the next pull
  // asks for, and what the call under way sent through it.
  std::shared_ptr<SharedRegion> region_;
  int64_t pull_bytes_ = kSharedHeaderBytes;
  bool shared_push_ = false;
  bool shared_pull_ = false;
  int64_t shared_sent_ = 0;
  // A shared push, kept to send it again as bytes if the server refuses
  // the region: its header, its tensors with their data in the region.
  wire::PushRequest push_header_;
  // The method of the push under way (Push or DecidePush).
  const char* push_method_ = kPushMethod;
  std::vector<TensorBytes> shared_tensors_;
  absl::Time deadline_;
};

absl::Status CallInParallel(const std::vector<std::string>& addresses,
                            absl::string_view what, absl::Time deadline,
                            const StartCall& start) {
  const int num_shards = static_cast<int>(addresses.size());
  std::unique_ptr<grpc::ClientContext[]> contexts(
      new grpc::ClientContext[num_shards]);
  std::vector<grpc::Status> statuses(num_shards);
  Mutex mu;
  CondVar all_done;
  int pending = num_shards;
  for (int i = 0; i < num_shards; ++i) {
    contexts[i].set_deadline(absl::ToChronoTime(deadline));
    start(i, &contexts[i], [&, i](grpc::Status status) {
      MutexLock lock(&mu);
      statuses[i] = std::move(status);
      if (--pending == 0) all_done.SignalAll();
    });
  }
  {
    // Bounded: every call ends by its deadline at the latest.
    MutexLock lock(&mu);
    all_done.WaitUntil(&mu, absl::InfiniteFuture(), [&]() {
      mu.AssertHeld();
      return pending == 0;
    });
  }
  for (int i = 0; i < num_shards; ++i) {
    if (!statuses[i].ok()) {
      return Annotate(
          FromGrpcStatus(statuses[i]),
          absl::StrCat(what, " to shard ", i, " at ", addresses[i], ": "));
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> CreatePsChannel(
    const std::string& address, int64_t max_message_bytes,
    const ClientCredentials& credentials) {
  // A server restarted after a crash is seen within a second.
  grpc::ChannelArguments args = PeerChannelArguments();
  args.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return CreateChannel(address, credentials, args);
}

GrpcShardChannel::GrpcShardChannel(
    int shard, const std::string& address,
    const std::shared_ptr<grpc::Channel>& channel, bool shared_memory)
    : name_(absl::StrCat("shard ", shard, " at ", address)),
      stub_(wire::ParameterServer::NewStub(channel)),
      health_(grpc::health::v1::Health::NewStub(channel)),
      raw_(std::make_unique<grpc::GenericStub>(channel)),
      shared_state_(shared_memory ? SharedState::kUnknown : SharedState::kOff),
      copy_pool_(shared_memory ? std::make_unique<ThreadPool>(MachineThreads(4))
                               : nullptr) {}

void GrpcShardChannel::ConfirmShared() {
  SharedState unknown = SharedState::kUnknown;
  if (shared_state_.compare_exchange_strong(unknown, SharedState::kConfirmed)) {
    spdlog::info("{}: pushes and pulls through shared memory", name_);
  }
}

void GrpcShardChannel::RefuseShared(absl::string_view why) {
  if (shared_state_.exchange(SharedState::kRefused) != SharedState::kRefused) {
    spdlog::warn("{}: no shared memory ({}); pushes and pulls go over gRPC",
                 name_, std::string(why));
  }
}

GrpcShardChannel::~GrpcShardChannel() = default;

template <typename Request, typename Response>
std::unique_ptr<ShardCall> GrpcShardChannel::Start(
    AsyncMethod<Request, Response> method, const Request& request,
    absl::Time deadline, Response* response) {
  auto call = std::make_unique<GrpcCall>(deadline);
  (stub_->async()->*method)(call->context(), &request, response,
                            call->Callback());
  return call;
}

std::unique_ptr<ShardCall> GrpcShardChannel::Initialize(
    const wire::InitializeRequest& request, absl::Time deadline,
    wire::InitializeResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::Initialize, request,
               deadline, response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::Join(
    const wire::JoinRequest& request, absl::Time deadline,
    wire::MembershipResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::Join, request, deadline,
               response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::Leave(
    const wire::LeaveRequest& request, absl::Time deadline,
    wire::MembershipResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::Leave, request, deadline,
               response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::Status(
    const wire::StatusRequest& request, absl::Time deadline,
    wire::StatusResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::Status, request, deadline,
               response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::Shutdown(
    const wire::ShutdownRequest& request, absl::Time deadline,
    wire::ShutdownResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::Shutdown, request, deadline,
               response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::Rollback(
    const wire::RollbackRequest& request, absl::Time deadline,
    wire::RollbackResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::Rollback, request, deadline,
               response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::Checkpoint(
    const wire::CheckpointRequest& request, absl::Time deadline,
    wire::CheckpointResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::Checkpoint, request,
               deadline, response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::LeaseData(
    const wire::LeaseDataRequest& request, absl::Time deadline,
    wire::LeaseDataResponse* response) {
  return Start(&wire::ParameterServer::Stub::async::LeaseData, request,
               deadline, response);
}

std::unique_ptr<ShardCall> GrpcShardChannel::Health(absl::Time deadline,
                                                    bool* serving) {
  auto call = std::make_unique<HealthCall>(deadline, serving);
  health_->async()->Check(call->context(), call->request(), call->response(),
                          call->Callback());
  return call;
}

std::unique_ptr<ShardExchange> GrpcShardChannel::NewExchange() {
  return std::make_unique<Exchange>(this);
}

}  // namespace ps
}  // namespace psgd
