#include "ps/server/grpc_service.h"

#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/mutex.h"
#include "common/status_macros.h"
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
    for (size_t k = 0; k < tensors.size(); ++k) {
      const TensorBytes& t = tensors[k];
      std::memcpy(segment_->data() + offsets[k], t.data.data(), t.data.size());
      SharedTensorToProto(t, offsets[k], header->add_variables());
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

}  // namespace

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

PsGrpcService::PsGrpcService(ParameterShard* shard, std::string token)
    : authenticator_(std::move(token)),
      handler_(shard),
      push_messages_(std::make_unique<PushMessagePool>()),
      pull_weights_(
          std::make_unique<PullWeights>(shard->options().wire_weights)) {}

PsGrpcService::~PsGrpcService() = default;

template <typename Handle>
grpc::ServerUnaryReactor* PsGrpcService::Respond(
    grpc::CallbackServerContext* ctx, Handle handle) {
  if (grpc::Status s = authenticator_.Check(*ctx); !s.ok()) {
    return Finish(ctx, s);
  }
  return Finish(ctx, ToGrpcStatus(handle()));
}

grpc::ServerUnaryReactor* PsGrpcService::Initialize(
    grpc::CallbackServerContext* ctx, const wire::InitializeRequest* request,
    wire::InitializeResponse* response) {
  return Respond(ctx, [&] { return handler_.Initialize(*request, response); });
}

grpc::ServerUnaryReactor* PsGrpcService::Pull(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  if (grpc::Status s = authenticator_.Check(*ctx); !s.ok()) {
    return Finish(ctx, s);
  }
  received_bytes_.fetch_add(static_cast<int64_t>(request->Length()),
                            std::memory_order_relaxed);
  return new PullReactor(&handler_, pull_weights_.get(), shared_segments_.get(),
                         *request, response, &sent_bytes_);
}

grpc::ServerUnaryReactor* PsGrpcService::Push(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  const int64_t bytes = static_cast<int64_t>(request->Length());
  received_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  // The token first: nothing of a stranger's push is parsed or kept.
  if (grpc::Status s = authenticator_.Check(*ctx); !s.ok()) {
    return Finish(ctx, s);
  }
  push_bytes_in_flight_.fetch_add(bytes, std::memory_order_relaxed);
  std::unique_ptr<wire::PushRequest> message = push_messages_->Take();
  grpc::ByteBuffer copy(*request);  // shares the slices
  grpc::Status status =
      grpc::SerializationTraits<wire::PushRequest>::Deserialize(&copy,
                                                                message.get());
  // The most a push of this shard can need (its lock, taken once).
  const int64_t shard_bytes = MaxSharedBytes(*handler_.shard());
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
          segment == nullptr ? absl::string_view() : segment->bytes());
    }());
    if (status.ok()) {
      bool own_buffer;
      status = grpc::SerializationTraits<wire::PushResponse>::Serialize(
          reply, response, &own_buffer);
      sent_bytes_.fetch_add(static_cast<int64_t>(response->Length()),
                            std::memory_order_relaxed);
    }
  }
  // At most twice the shard's tensors kept per spare message.
  push_messages_->Give(std::move(message), 2 * shard_bytes + (1 << 20));
  push_bytes_in_flight_.fetch_sub(bytes, std::memory_order_relaxed);
  return Finish(ctx, status);
}

void PsGrpcService::AddSummary(JsonObject* summary) const {
  summary->Set("payload_received_bytes", payload_received_bytes())
      .Set("payload_sent_bytes", payload_sent_bytes());
  if (ucx_ == nullptr) return;
  const UcxDataPlane::Counters c = ucx_->counters();
  summary->Set("ucx_pushes", c.pushes)
      .Set("ucx_pulls", c.pulls)
      .Set("ucx_pulls_cancelled", c.pulls_cancelled)
      .Set("ucx_pulls_withdrawn", c.pulls_withdrawn)
      .Set("ucx_bad_key", c.messenger.bad_key)
      .Set("ucx_other_connection", c.messenger.other_connection)
      .Set("ucx_wrong_worker", c.wrong_worker)
      .Set("ucx_malformed", c.malformed + c.messenger.malformed)
      .Set("ucx_receive_failed", c.messenger.receive_failed);
}

grpc::ServerUnaryReactor* PsGrpcService::Join(
    grpc::CallbackServerContext* ctx, const wire::JoinRequest* request,
    wire::MembershipResponse* response) {
  return Respond(ctx, [&]() -> absl::Status {
    RETURN_IF_ERROR(handler_.Join(*request, response));
    // A joined worker's key for the UCX data plane travels only here, over
    // the authenticated channel.
    if (ucx_ != nullptr && request->worker_id() >= 0) {
      return ucx_->Admit(request->worker_id(), request->ucx_new_link(),
                         response->mutable_ucx());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PsGrpcService::Leave(
    grpc::CallbackServerContext* ctx, const wire::LeaveRequest* request,
    wire::MembershipResponse* response) {
  return Respond(ctx, [&]() -> absl::Status {
    RETURN_IF_ERROR(handler_.Leave(*request, response));
    if (ucx_ != nullptr) ucx_->Revoke(request->worker_id());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PsGrpcService::Status(
    grpc::CallbackServerContext* ctx, const wire::StatusRequest* request,
    wire::StatusResponse* response) {
  return Respond(ctx, [&] {
    RETURN_IF_ERROR(handler_.Status(*request, response));
    ShardMemory serving;
    AddServingMemory(&serving);
    response->mutable_memory()->set_pushes_in_flight(serving.pushes_in_flight);
    response->mutable_memory()->set_push_buffers(serving.push_buffers);
    return absl::OkStatus();
  });
}

void PsGrpcService::AddServingMemory(ShardMemory* memory) const {
  memory->pushes_in_flight =
      push_bytes_in_flight_.load(std::memory_order_relaxed);
  memory->push_buffers = push_messages_->SpareBytes();
}

grpc::ServerUnaryReactor* PsGrpcService::Shutdown(
    grpc::CallbackServerContext* ctx, const wire::ShutdownRequest* request,
    wire::ShutdownResponse* response) {
  return Respond(ctx, [&] { return handler_.Shutdown(*request, response); });
}

grpc::ServerUnaryReactor* PsGrpcService::Rollback(
    grpc::CallbackServerContext* ctx, const wire::RollbackRequest* request,
    wire::RollbackResponse* response) {
  return Respond(ctx, [&] { return handler_.Rollback(*request, response); });
}

grpc::ServerUnaryReactor* PsGrpcService::Checkpoint(
    grpc::CallbackServerContext* ctx, const wire::CheckpointRequest* request,
    wire::CheckpointResponse* response) {
  return Respond(ctx, [&] { return handler_.Checkpoint(*request, response); });
}

grpc::ServerUnaryReactor* PsGrpcService::LeaseData(
    grpc::CallbackServerContext* ctx, const wire::LeaseDataRequest* request,
    wire::LeaseDataResponse* response) {
  return Respond(ctx, [&] { return handler_.LeaseData(*request, response); });
}

grpc::ServerUnaryReactor* PsGrpcService::Decide(
    grpc::CallbackServerContext* ctx, const wire::DecideRequest* request,
    wire::DecideResponse* response) {
  return Respond(ctx, [&] { return handler_.Decide(*request, response); });
}

grpc::ServerUnaryReactor* PsGrpcService::ListCheckpoints(
    grpc::CallbackServerContext* ctx,
    const wire::ListCheckpointsRequest* request,
    wire::ListCheckpointsResponse* response) {
  return Respond(ctx,
                 [&] { return handler_.ListCheckpoints(*request, response); });
}

}  // namespace ps
}  // namespace psgd
