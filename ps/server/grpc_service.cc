#include "ps/server/grpc_service.h"

#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "ps/wire/shared_memory.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_dtype.h"
#include "ps/wire/wire_zero_copy.h"

namespace psgd {
namespace ps {
namespace {

// The largest shared memory region a worker may name: the shard's tensors in
// float32, each aligned, after the header.
int64_t MaxSharedBytes(const ParameterShard& shard) {
  return shard.MaxTensorAreaBytes(kSharedHeaderBytes, kSharedAlign);
}

// Finishes a unary call with `status`.
grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx,
                                 const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// A pull that may wait: registered with the shard, finished by whichever
// comes first, the shard reaching the step or the call's cancellation
// (its deadline, the client, or the server shutting down).
class PullReactor final : public grpc::ServerUnaryReactor {
 public:
  PullReactor(ShardRequestHandler* handler, PullWeights* pull_weights,
              SharedSegments* shared_segments,
              const grpc::ByteBuffer& request_bytes, grpc::ByteBuffer* response,
              std::atomic<int64_t>* sent_bytes)
      : shard_(handler->shard()),
        pull_weights_(pull_weights),
        response_(response),
        sent_bytes_(sent_bytes),
        arrived_(absl::Now()) {
    grpc::ByteBuffer bytes(request_bytes);  // shares the slices
    wire::PullRequest request;
    grpc::Status parsed =
        grpc::SerializationTraits<wire::PullRequest>::Deserialize(&bytes,
                                                                  &request);
    if (!parsed.ok()) {
      Finish(parsed);
      return;
    }
    variables_.assign(request.variables().begin(), request.variables().end());
    if (request.has_shared_memory()) {
      absl::StatusOr<std::shared_ptr<const SharedSegment>> segment =
          shared_segments->Attach(request.shared_memory(),
                                  MaxSharedBytes(*shard_));
      if (segment.ok()) {
        segment_ = *std::move(segment);
      } else if (IsSharedMemoryRefusal(segment.status())) {
        refused_ = std::string(segment.status().message());
      } else {
        Finish(ToGrpcStatus(segment.status()));
        return;
      }
    }
    // Once the shard may call Reply, OnCancel may race with it; CancelPull
    // decides which of the two finishes the call.
    ticket_ = handler->Pull(
        request,
        [this](absl::StatusOr<ParameterShard::Snapshot> s) { Reply(s); });
  }

  void OnCancel() override {
    if (ticket_ != 0 && shard_->CancelPull(ticket_)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                          "pull cancelled or past its deadline before the "
                          "shard reached its step"));
    }
  }
  void OnDone() override { delete this; }

 private:
  void Reply(const absl::StatusOr<ParameterShard::Snapshot>& snapshot) {
    if (!snapshot.ok()) {
      Finish(ToGrpcStatus(snapshot.status()));
      return;
    }
    const WeightsSnapshot& s = **snapshot;
    // All tensors, or those the request names (a pull of a part).
    absl::StatusOr<std::vector<int>> selected = s.layout->Select(variables_);
    if (!selected.ok()) {
      Finish(ToGrpcStatus(Annotate(
          selected.status(),
          absl::StrCat("shard ", shard_->options().shard_index, ": "))));
      return;
    }
    wire::PullResponse header;
    header.set_step(s.step);
    header.set_wait_micros(absl::ToInt64Microseconds(absl::Now() - arrived_));
    header.set_generation(s.generation);
    header.set_learning_rate(s.learning_rate);
    if (!refused_.empty()) header.set_shared_memory_refused(refused_);
    PullWeights::Tensors t = pull_weights_->Get(*snapshot, *selected);
    if (segment_ == nullptr || !ReplyShared(t.tensors, &header)) {
      *response_ =
          EncodeWithTensors(header, wire::PullResponse::kVariablesFieldNumber,
                            t.tensors, std::move(t.keep_alive));
    }
    sent_bytes_->fetch_add(static_cast<int64_t>(response_->Length()),
                           std::memory_order_relaxed);
    Finish(grpc::Status::OK);  // last: OnDone may delete this at once
  }

  // Copies `tensors` into the segment and answers with where they are;
  // false (with header's shared_memory_needed set) when they do not fit.
  bool ReplyShared(absl::Span<const TensorBytes> tensors,
                   wire::PullResponse* header) {
    SharedLayout layout;
    std::vector<int64_t> offsets;
    for (const TensorBytes& t : tensors) {
      offsets.push_back(layout.Add(static_cast<int64_t>(t.data.size())));
    }
    if (layout.size() > segment_->size()) {
      header->set_shared_memory_needed(layout.size());
      return false;
    }
    // The copy on the shard's bulk threads, a part of the bytes each.
    std::vector<int64_t> bytes;
    for (const TensorBytes& t : tensors) {
      bytes.push_back(static_cast<int64_t>(t.data.size()));
    }
    ParallelForSpans(shard_->bulk_pool(), bytes, kMinBulkPartBytes,
                     [&](size_t k, int64_t begin, int64_t end) {
                       std::memcpy(segment_->data() + offsets[k] + begin,
                                   tensors[k].data.data() + begin, end - begin);
                     });
    for (size_t k = 0; k < tensors.size(); ++k) {
      SharedTensorToProto(tensors[k], offsets[k], header->add_variables());
    }
    bool own_buffer;
    grpc::Status s = grpc::SerializationTraits<wire::PullResponse>::Serialize(
        *header, response_, &own_buffer);
    // A PullResponse of names and offsets always serializes.
    return s.ok();
  }

  ParameterShard* const shard_;             // Not owned.
  PullWeights* const pull_weights_;         // The service's.
  grpc::ByteBuffer* const response_;        // Owned by gRPC.
  std::atomic<int64_t>* const sent_bytes_;  // The service's counter.
  const absl::Time arrived_;
  // PullRequest.variables: the tensors asked for (empty: all).
  std::vector<std::string> variables_;
  // The segment the pull named, or why it could not be opened.
  std::shared_ptr<const SharedSegment> segment_;
  std::string refused_;
  uint64_t ticket_ = 0;
};

// The entries of the top-level field `field` in the serialized message
// `bytes`, counted by skipping over each field (nothing is allocated);
// -1 when the bytes are no message.
int64_t CountEntries(const grpc::ByteBuffer& bytes, int field) {
  using google::protobuf::internal::WireFormatLite;
  grpc::ByteBuffer copy(bytes);  // shares the slices
  grpc::ProtoBufferReader reader(&copy);
  google::protobuf::io::CodedInputStream in(&reader);
  int64_t n = 0;
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == field) ++n;
    if (!WireFormatLite::SkipField(&in, tag)) return -1;
  }
  return in.ConsumedEntireMessage() ? n : -1;
}

}  // namespace

absl::Status CheckRequestLimit(const RequestLimit& limit,
                               const grpc::ByteBuffer& request) {
  const int64_t bytes = static_cast<int64_t>(request.Length());
  if (limit.max_bytes > 0 && bytes > limit.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a ", limit.method, " request of ", bytes,
                     " bytes, more than its limit of ", limit.max_bytes));
  }
  if (limit.field == 0) return absl::OkStatus();
  const int64_t entries = CountEntries(request, limit.field);
  if (entries < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", limit.method, " request that is no message"));
  }
  if (entries > limit.max_entries) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a ", limit.method, " request of ", entries, " entries of field ",
        limit.field, ", more than its limit of ", limit.max_entries));
  }
  return absl::OkStatus();
}

// Small requests: a cluster name, ids, a reason.
constexpr int64_t kSmallRequestBytes = 64 << 10;
// Initialize: every variable's values (gRPC's receive limit), at most 2^16
// variables (the largest registry network has a few hundred).
const RequestLimit PsGrpcService::kInitializeLimit = {
    "Initialize", 0, wire::InitializeRequest::kVariablesFieldNumber, 1 << 16};
// Pull: names of the variables asked for.
const RequestLimit PsGrpcService::kPullLimit = {
    "Pull", 4 << 20, wire::PullRequest::kVariablesFieldNumber, 1 << 16};
const RequestLimit PsGrpcService::kCommitLimit = {"Commit", kSmallRequestBytes};
const RequestLimit PsGrpcService::kJoinLimit = {"Join", kSmallRequestBytes};
const RequestLimit PsGrpcService::kLeaveLimit = {"Leave", kSmallRequestBytes};
const RequestLimit PsGrpcService::kStatusLimit = {"Status", kSmallRequestBytes};
const RequestLimit PsGrpcService::kShutdownLimit = {"Shutdown",
                                                    kSmallRequestBytes};
// ApplyDecisions: the relay sends at most DecisionRelay::kMaxBatch decisions
// and kMaxBatchBytes at a time (ps/shard/decision_relay.h).
const RequestLimit PsGrpcService::kApplyDecisionsLimit = {
    "ApplyDecisions", 2 * DecisionRelay::kMaxBatchBytes,
    wire::ApplyDecisionsRequest::kDecisionsFieldNumber,
    DecisionRelay::kMaxBatch};
const RequestLimit PsGrpcService::kRollbackLimit = {"Rollback",
                                                    kSmallRequestBytes};
const RequestLimit PsGrpcService::kCheckpointLimit = {"Checkpoint",
                                                      kSmallRequestBytes};
const RequestLimit PsGrpcService::kLeaseDataLimit = {"LeaseData",
                                                     kSmallRequestBytes};
const RequestLimit PsGrpcService::kListCheckpointsLimit = {"ListCheckpoints",
                                                           kSmallRequestBytes};

// Push messages for reuse: a request's gradient buffers keep their capacity
// (Clear() keeps them), so a 2 MB gradient is not parsed into freshly mapped
// memory on every call. Only messages of authenticated pushes come here, and
// one that holds more than the shard's tensors can need is freed, not kept.
// Thread-safe.
class PsGrpcService::PushMessagePool {
 public:
  // Spare messages kept; more are freed.
  static constexpr size_t kMaxSpare = 16;

  std::unique_ptr<wire::PushRequest> Take() {
    MutexLock lock(&mu_);
    if (spare_.empty()) return std::make_unique<wire::PushRequest>();
    std::unique_ptr<wire::PushRequest> m = std::move(spare_.back());
    spare_.pop_back();
    return m;
  }

  // Keeps `message` for the next push when it holds at most `max_bytes`.
  void Give(std::unique_ptr<wire::PushRequest> message, int64_t max_bytes) {
    message->Clear();
    if (static_cast<int64_t>(message->SpaceUsedLong()) > max_bytes) return;
    MutexLock lock(&mu_);
    if (spare_.size() < kMaxSpare) spare_.push_back(std::move(message));
  }

  // Bytes the spare messages keep allocated (a cleared message keeps its
  // tensors' buffers for the next parse).
  int64_t SpareBytes() const {
    MutexLock lock(&mu_);
    int64_t n = 0;
    for (const auto& m : spare_) n += static_cast<int64_t>(m->SpaceUsedLong());
    return n;
  }

 private:
  mutable Mutex mu_;
  std::vector<std::unique_ptr<wire::PushRequest>> spare_ ABSL_GUARDED_BY(mu_);
};

PsGrpcService::PsGrpcService(ParameterShard* shard, std::string token,
                             std::string peer_token, WireDTypes wire)
    : authenticator_(token),
      peer_authenticator_(peer_token.empty() ? token : peer_token,
                          kPeerUnauthenticatedMessage),
      handler_(shard, wire),
      push_messages_(std::make_shared<PushMessagePool>()),
      pull_weights_(std::make_unique<PullWeights>(wire.weights)) {}

PsGrpcService::~PsGrpcService() = default;

template <typename Request, typename Response, typename Handle>
grpc::ServerUnaryReactor* PsGrpcService::Respond(
    CallAuthenticator* authenticator, grpc::CallbackServerContext* ctx,
    const RequestLimit& limit, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, Handle handle) {
  if (grpc::Status s = authenticator->Check(*ctx); !s.ok()) {
    return Finish(ctx, s);
  }
  if (absl::Status s = CheckRequestLimit(limit, *request); !s.ok()) {
    return Finish(ctx, ToGrpcStatus(s));
  }
  Request parsed;
  grpc::ByteBuffer bytes(*request);  // shares the slices
  grpc::Status status =
      grpc::SerializationTraits<Request>::Deserialize(&bytes, &parsed);
  if (!status.ok()) {
    return Finish(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    absl::StrCat("a ", limit.method,
                                                 " request that cannot be "
                                                 "parsed: ",
                                                 status.error_message())));
  }
  Response reply;
  status = ToGrpcStatus(handle(parsed, &reply));
  if (status.ok()) {
    bool own_buffer;
    status = grpc::SerializationTraits<Response>::Serialize(reply, response,
                                                            &own_buffer);
  }
  return Finish(ctx, status);
}

grpc::ServerUnaryReactor* PsGrpcService::Initialize(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Respond<wire::InitializeRequest, wire::InitializeResponse>(
      ctx, kInitializeLimit, request, response,
      [&](const wire::InitializeRequest& r, wire::InitializeResponse* out) {
        return handler_.Initialize(r, out);
      });
}

grpc::ServerUnaryReactor* PsGrpcService::Pull(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  if (grpc::Status s = authenticator_.Check(*ctx); !s.ok()) {
    return Finish(ctx, s);
  }
  if (absl::Status s = CheckRequestLimit(kPullLimit, *request); !s.ok()) {
    return Finish(ctx, ToGrpcStatus(s));
  }
  received_bytes_.fetch_add(static_cast<int64_t>(request->Length()),
                            std::memory_order_relaxed);
  return new PullReactor(&handler_, pull_weights_.get(), shared_segments_.get(),
                         *request, response, &sent_bytes_);
}

grpc::ServerUnaryReactor* PsGrpcService::Push(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  return ServePush(ctx, request, response, PushMethod::kPush);
}

grpc::ServerUnaryReactor* PsGrpcService::DecidePush(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServePush(ctx, request, response, PushMethod::kDecidePush);
}

grpc::ServerUnaryReactor* PsGrpcService::ServePush(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, PushMethod method) {
  const int64_t bytes = static_cast<int64_t>(request->Length());
  received_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  // The token first: nothing of a stranger's push is parsed or kept.
  if (grpc::Status s = authenticator_.Check(*ctx); !s.ok()) {
    return Finish(ctx, s);
  }
  push_bytes_in_flight_.fetch_add(bytes, std::memory_order_relaxed);
  // The most a push of this shard can need (its lock, taken once).
  const int64_t shard_bytes = MaxSharedBytes(*handler_.shard());
  // The message goes back to the pool when the last of this call and a
  // shard that staged its gradients in it (ParameterShard::Push's `keep`)
  // lets go; at most twice the shard's tensors kept per spare message.
  std::shared_ptr<wire::PushRequest> message(
      push_messages_->Take().release(),
      [pool = push_messages_,
       keep = 2 * shard_bytes + (1 << 20)](wire::PushRequest* m) {
        pool->Give(std::unique_ptr<wire::PushRequest>(m), keep);
      });
  grpc::ByteBuffer copy(*request);  // shares the slices
  grpc::Status status =
      grpc::SerializationTraits<wire::PushRequest>::Deserialize(&copy,
                                                                message.get());
  if (status.ok()) {
    wire::PushResponse reply;
    status = ToGrpcStatus([&]() -> absl::Status {
      // The segment the gradients lie in, held while they are read.
      std::shared_ptr<const SharedSegment> segment;
      if (message->has_shared_memory()) {
        ASSIGN_OR_RETURN(segment, shared_segments_->Attach(
                                      message->shared_memory(), shard_bytes));
      }
      return handler_.Push(
          *message, &reply,
          segment == nullptr ? absl::string_view() : segment->bytes(),
          /*shared_is_private=*/false, message, method);
    }());
    if (status.ok()) {
      bool own_buffer;
      status = grpc::SerializationTraits<wire::PushResponse>::Serialize(
          reply, response, &own_buffer);
      sent_bytes_.fetch_add(static_cast<int64_t>(response->Length()),
                            std::memory_order_relaxed);
    }
  }
  message.reset();
  push_bytes_in_flight_.fetch_sub(bytes, std::memory_order_relaxed);
  return Finish(ctx, status);
}

grpc::ServerUnaryReactor* PsGrpcService::Commit(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  // Counted with the pushes, as the worker's client counts it.
  received_bytes_.fetch_add(static_cast<int64_t>(request->Length()),
                            std::memory_order_relaxed);
  return Respond<wire::CommitRequest, wire::PushResponse>(
      ctx, kCommitLimit, request, response,
      [&](const wire::CommitRequest& r,
          wire::PushResponse* out) -> absl::Status {
        RETURN_IF_ERROR(handler_.Commit(r, out));
        sent_bytes_.fetch_add(static_cast<int64_t>(out->ByteSizeLong()),
                              std::memory_order_relaxed);
        return absl::OkStatus();
      });
}

void PsGrpcService::AddSummary(JsonObject* summary) const {
  summary->Set("payload_received_bytes", payload_received_bytes())
      .Set("payload_sent_bytes", payload_sent_bytes());
  if (ucx_ == nullptr) return;
  const UcxDataPlane::Counters c = ucx_->counters();
  summary->Set("ucx_pushes", c.pushes)
      .Set("ucx_commits", c.commits)
      .Set("ucx_pulls", c.pulls)
      .Set("ucx_pulls_cancelled", c.pulls_cancelled)
      .Set("ucx_pulls_withdrawn", c.pulls_withdrawn)
      .Set("ucx_bad_key", c.messenger.bad_key)
      .Set("ucx_other_connection", c.messenger.other_connection)
      .Set("ucx_wrong_worker", c.wrong_worker)
      .Set("ucx_malformed", c.malformed + c.messenger.malformed)
      .Set("ucx_receive_failed", c.messenger.receive_failed)
      .Set("ucx_unkeyed_closed", c.messenger.unkeyed_closed)
      .Set("ucx_unkeyed_evicted", c.messenger.unkeyed_evicted)
      .Set("ucx_too_large", c.messenger.too_large);
}

grpc::ServerUnaryReactor* PsGrpcService::Join(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  return Respond<wire::JoinRequest, wire::MembershipResponse>(
      ctx, kJoinLimit, request, response,
      [&](const wire::JoinRequest& r,
          wire::MembershipResponse* out) -> absl::Status {
        RETURN_IF_ERROR(handler_.Join(r, out));
        // A joined worker's key for the UCX data plane travels only here,
        // over the authenticated channel.
        if (ucx_ != nullptr && r.worker_id() >= 0) {
          return ucx_->Admit(r.worker_id(), r.ucx_new_link(),
                             out->mutable_ucx());
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* PsGrpcService::Leave(grpc::CallbackServerContext* ctx,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return Respond<wire::LeaveRequest, wire::MembershipResponse>(
      ctx, kLeaveLimit, request, response,
      [&](const wire::LeaveRequest& r,
          wire::MembershipResponse* out) -> absl::Status {
        RETURN_IF_ERROR(handler_.Leave(r, out));
        if (ucx_ != nullptr) ucx_->Revoke(r.worker_id());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* PsGrpcService::Status(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Respond<wire::StatusRequest, wire::StatusResponse>(
      ctx, kStatusLimit, request, response,
      [&](const wire::StatusRequest& r,
          wire::StatusResponse* out) -> absl::Status {
        RETURN_IF_ERROR(handler_.Status(r, out));
        ShardMemory serving;
        AddServingMemory(&serving);
        out->mutable_memory()->set_pushes_in_flight(serving.pushes_in_flight);
        out->mutable_memory()->set_push_buffers(serving.push_buffers);
        return absl::OkStatus();
      });
}

void PsGrpcService::AddServingMemory(ShardMemory* memory) const {
  memory->pushes_in_flight =
      push_bytes_in_flight_.load(std::memory_order_relaxed);
  memory->push_buffers = push_messages_->SpareBytes();
}

// The methods that hand their request to the handler's method of the same
// name and answer with its reply.
#define PSGD_HANDLED_METHOD(Method, Request, Response)                   \
  grpc::ServerUnaryReactor* PsGrpcService::Method(                       \
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request, \
      grpc::ByteBuffer* response) {                                      \
    return Respond<wire::Request, wire::Response>(                       \
        ctx, k##Method##Limit, request, response,                        \
        [&](const wire::Request& r, wire::Response* out) {               \
          return handler_.Method(r, out);                                \
        });                                                              \
  }
PSGD_HANDLED_METHOD(Shutdown, ShutdownRequest, ShutdownResponse)
PSGD_HANDLED_METHOD(Rollback, RollbackRequest, RollbackResponse)
PSGD_HANDLED_METHOD(Checkpoint, CheckpointRequest, CheckpointResponse)
PSGD_HANDLED_METHOD(LeaseData, LeaseDataRequest, LeaseDataResponse)
PSGD_HANDLED_METHOD(ListCheckpoints, ListCheckpointsRequest,
                    ListCheckpointsResponse)
#undef PSGD_HANDLED_METHOD

grpc::ServerUnaryReactor* PsGrpcService::ApplyDecisions(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  // Shard 0's call alone: with the servers' peer token, not a worker's.
  return Respond<wire::ApplyDecisionsRequest, wire::ApplyDecisionsResponse>(
      &peer_authenticator_, ctx, kApplyDecisionsLimit, request, response,
      [&](const wire::ApplyDecisionsRequest& r,
          wire::ApplyDecisionsResponse* out) {
        return handler_.ApplyDecisions(r, out);
      });
}

}  // namespace ps
}  // namespace psgd
