#include "ps/client/grpc_client.h"

#include <grpc/grpc.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/channel_arguments.h>

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "ps/client/model_slices.h"
#include "common/mutex.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_dtype.h"
#include "ps/wire/wire_zero_copy.h"

namespace psgd {
namespace ps {

// What one push or pull to one shard needs besides the stub.
struct GrpcPsClient::CallBuffers {
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  // Gradients in the wire dtype while a push is sent.
  WireEncoder encoder;
  // A pulled 16-bit slice before it is converted.
  std::vector<uint16_t> pull_scratch;
};

struct GrpcPsClient::Shard {
  std::string address;
  std::unique_ptr<wire::ParameterServer::Stub> stub;
  // Push and Pull as raw bytes (ps/wire/wire_zero_copy.h).
  std::unique_ptr<grpc::GenericStub> raw;
  // Pull's and Push's, reused from call to call (PullPart and PushPart,
  // which may run on several threads at once, have their own).
  CallBuffers buffers;
};

namespace {

// The full names of the methods called through the generic stub.
constexpr char kPushMethod[] = "/psgd.ps.wire.ParameterServer/Push";
constexpr char kPullMethod[] = "/psgd.ps.wire.ParameterServer/Pull";

}  // namespace

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
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // gRPC's default reconnect backoff grows to 2 minutes: a server restarted
  // after a crash would stay unseen that long. The minimum is also how long
  // a connection attempt may take until the server's HTTP/2 SETTINGS
  // arrive: at 100 ms, attempts on a loaded machine (load average 8 and
  // more, as when other builds run) timed out and calls failed with
  // UNAVAILABLE "timed out before receiving SETTINGS frame".
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return CreateChannel(address, credentials, args);
}

absl::StatusOr<std::unique_ptr<GrpcPsClient>> GrpcPsClient::Create(
    GrpcClientOptions options) {
  if (options.addresses.empty()) {
    return absl::InvalidArgumentError("grpc client: no server addresses");
  }
  if (options.max_message_bytes < (int64_t{4} << 20) ||
      options.max_message_bytes > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grpc client: max_message_bytes=", options.max_message_bytes,
        " must be in [4 MiB, 2 GiB - 1]"));
  }
  ASSIGN_OR_RETURN(Placement placement,
                   PlaceVariables(options.variables,
                                  static_cast<int>(options.addresses.size()),
                                  options.split_threshold_bytes));
  ASSIGN_OR_RETURN(ClientCredentials credentials,
                   MakeClientCredentials(options.security));
  std::unique_ptr<GrpcPsClient> client(
      new GrpcPsClient(std::move(options), std::move(placement)));
  for (const std::string& address : client->options_.addresses) {
    auto shard = std::make_unique<Shard>();
    shard->address = address;
    std::shared_ptr<grpc::Channel> channel = CreatePsChannel(
        address, client->options_.max_message_bytes, credentials);
    shard->stub = wire::ParameterServer::NewStub(channel);
    shard->raw = std::make_unique<grpc::GenericStub>(channel);
    client->shards_.push_back(std::move(shard));
  }
  return client;
}

GrpcPsClient::GrpcPsClient(GrpcClientOptions options, Placement placement)
    : options_(std::move(options)), placement_(std::move(placement)) {}

GrpcPsClient::~GrpcPsClient() = default;

template <typename Request, typename Response>
absl::Status GrpcPsClient::CallEach(absl::string_view what,
                                    AsyncMethod<Request, Response> method,
                                    const std::vector<Request>& requests,
                                    std::vector<Response>* responses) {
  responses->resize(num_shards());
  return CallInParallel(
      options_.addresses, what, absl::Now() + options_.rpc_timeout,
      [&](int i, grpc::ClientContext* ctx, auto done) {
        (shards_[i]->stub->async()->*method)(ctx, &requests[i],
                                             &(*responses)[i], std::move(done));
      });
}

absl::Status GrpcPsClient::Initialize(
    absl::Span<const NamedConstTensorView> variables) {
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, variables, &model));
  std::vector<wire::InitializeRequest> requests(num_shards());
  for (int i = 0; i < num_shards(); ++i) {
    requests[i].set_cluster(options_.cluster);
    requests[i].set_run_dir(options_.run_dir);
    TensorBytesToProto(ShardSlices(placement_, i, model),
                       requests[i].mutable_variables());
  }
  std::vector<wire::InitializeResponse> responses;
  return CallEach<wire::InitializeRequest, wire::InitializeResponse>(
      "initialize", &wire::ParameterServer::Stub::async::Initialize, requests,
      &responses);
}

template <typename Request>
absl::Status GrpcPsClient::ChangeMembership(
    absl::string_view what,
    AsyncMethod<Request, wire::MembershipResponse> method) {
  Request r;
  r.set_cluster(options_.cluster);
  r.set_worker_id(options_.worker_id);
  std::vector<wire::MembershipResponse> responses;
  return CallEach(what, method, std::vector<Request>(num_shards(), r),
                  &responses);
}

absl::Status GrpcPsClient::Join() {
  return ChangeMembership<wire::JoinRequest>(
      "join", &wire::ParameterServer::Stub::async::Join);
}

absl::Status GrpcPsClient::Leave() {
  return ChangeMembership<wire::LeaveRequest>(
      "leave", &wire::ParameterServer::Stub::async::Leave);
}

absl::StatusOr<ModelVersion> GrpcPsClient::Pull(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  RETURN_IF_ERROR(CheckVersion(min_version, num_shards()));
  std::vector<float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, out, &model));
  std::vector<CallBuffers*> buffers;
  for (auto& shard : shards_) buffers.push_back(&shard->buffers);
  return PullModel(min_version, deadline, model, /*part=*/false, buffers);
}

absl::StatusOr<ModelVersion> GrpcPsClient::PullPart(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  RETURN_IF_ERROR(CheckVersion(min_version, num_shards()));
  std::vector<float*> model;
  RETURN_IF_ERROR(OrderPart(placement_, out, &model));
  std::vector<CallBuffers> own(num_shards());
  std::vector<CallBuffers*> buffers;
  for (CallBuffers& b : own) buffers.push_back(&b);
  return PullModel(min_version, deadline, model, /*part=*/true, buffers);
}

absl::StatusOr<ModelVersion> GrpcPsClient::PullModel(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<float* const> model, bool part,
    absl::Span<CallBuffers* const> buffers) {
  const std::vector<const float*> asked_model(model.begin(), model.end());
  std::vector<bool> asked(num_shards(), false);
  for (int i = 0; i < num_shards(); ++i) {
    const std::vector<TensorBytes> slices =
        ShardSlices(placement_, i, asked_model);
    // A whole pull asks every shard, as a whole push goes to every one.
    if (part && slices.empty()) continue;
    asked[i] = true;
    wire::PullRequest r;
    r.set_cluster(options_.cluster);
    r.set_min_step(min_version.steps[i]);
    r.set_worker_id(options_.worker_id);
    r.set_generation(min_version.generation);
    if (part) {
      for (const TensorBytes& t : slices) r.add_variables(std::string(t.name));
    }
    bool own_buffer;
    grpc::Status s = grpc::SerializationTraits<wire::PullRequest>::Serialize(
        r, &buffers[i]->request, &own_buffer);
    if (!s.ok()) return FromGrpcStatus(s);
  }
  RETURN_IF_ERROR(CallInParallel(
      options_.addresses, "pull", deadline, [&](int i, auto* ctx, auto done) {
        if (!asked[i]) {
          done(grpc::Status::OK);
          return;
        }
        CallBuffers& b = *buffers[i];
        shards_[i]->raw->UnaryCall(ctx, kPullMethod, {}, &b.request,
                                   &b.response, std::move(done));
      }));
  // Each slice's bytes go straight from gRPC's buffers into `model`.
  ModelVersion version = ModelVersion::AtLeast(num_shards(), kNoPush);
  bool first = true;
  for (int i = 0; i < num_shards(); ++i) {
    if (!asked[i]) continue;
    CallBuffers& b = *buffers[i];
    sent_bytes_ += static_cast<int64_t>(b.request.Length());
    received_bytes_ += static_cast<int64_t>(b.response.Length());
    ShardAssembler assembler(placement_, i, model, options_.wire_weights,
                             &b.pull_scratch);
    int64_t wait_micros = 0;
    int64_t generation = 0;
    RETURN_IF_ERROR(
        Annotate(DecodePullResponse(
                     &b.response, &version.steps[i], &wait_micros,
                     [&](const TensorBytes& t, size_t bytes) {
                       return assembler.Destination(t, bytes);
                     },
                     &generation,
                     [&](const TensorBytes& t) { return assembler.Done(t); }),
                 absl::StrCat("pull from shard ", i, " at ",
                              shards_[i]->address, ": ")));
    RETURN_IF_ERROR(assembler.Finish());
    RETURN_IF_ERROR(AgreeOnGeneration(first ? 0 : i, generation, &version));
    first = false;
    b.response.Clear();
    version.server_wait =
        std::max(version.server_wait, absl::Microseconds(wait_micros));
  }
  return version;
}

absl::StatusOr<PushResult> GrpcPsClient::Push(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, gradients, &model));
  std::vector<CallBuffers*> buffers;
  for (auto& shard : shards_) buffers.push_back(&shard->buffers);
  return PushModel(version, model, /*part=*/false, buffers);
}

absl::StatusOr<PushResult> GrpcPsClient::PushPart(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderPart(placement_, gradients, &model));
  std::vector<CallBuffers> own(num_shards());
  std::vector<CallBuffers*> buffers;
  for (CallBuffers& b : own) buffers.push_back(&b);
  return PushModel(version, model, /*part=*/true, buffers);
}

absl::StatusOr<PushResult> GrpcPsClient::PushModel(
    const ModelVersion& version, absl::Span<const float* const> model,
    bool part, absl::Span<CallBuffers* const> buffers) {
  // The shards that get something: their step is not kNoPush and they hold
  // slices of the gradients (all of them do, for a whole push).
  std::vector<bool> send(num_shards(), false);
  // The requests reference the gradients' memory; `released` tells when
  // gRPC holds none of it any more, so that the caller may change it.
  auto released = std::make_shared<Notification>();
  {
    std::shared_ptr<const void> in_use(
        nullptr, [released](const void*) { released->Notify(); });
    for (int i = 0; i < num_shards(); ++i) {
      if (version.steps[i] == kNoPush) continue;
      const std::vector<TensorBytes> slices = ShardSlices(placement_, i, model);
      if (part && slices.empty()) continue;
      send[i] = true;
      wire::PushRequest header;
      header.set_cluster(options_.cluster);
      header.set_worker_id(options_.worker_id);
      header.set_step(version.steps[i]);
      header.set_generation(version.generation);
      header.set_partial(part);
      buffers[i]->request = EncodeWithTensors(
          header, wire::PushRequest::kGradientsFieldNumber,
          buffers[i]->encoder.FromFloat(slices, options_.wire_gradients),
          in_use);
    }
  }
  absl::Status status = CallInParallel(
      options_.addresses, "push", absl::Now() + options_.rpc_timeout,
      [&](int i, auto* ctx, auto done) {
        if (!send[i]) {
          done(grpc::Status::OK);
          return;
        }
        CallBuffers& b = *buffers[i];
        shards_[i]->raw->UnaryCall(ctx, kPushMethod, {}, &b.request,
                                   &b.response, std::move(done));
      });
  for (int i = 0; i < num_shards(); ++i) {
    if (!send[i]) continue;
    sent_bytes_ += static_cast<int64_t>(buffers[i]->request.Length());
    received_bytes_ += static_cast<int64_t>(buffers[i]->response.Length());
  }
  for (CallBuffers* b : buffers) b->request.Clear();
  if (!released->WaitForNotificationWithDeadline(absl::Now() +
                                                 absl::Seconds(30))) {
    return absl::InternalError(
        "push: gRPC still holds the gradients' memory 30 s after the call");
  }
  RETURN_IF_ERROR(status);
  PushResult result;
  for (int i = 0; i < num_shards(); ++i) {
    if (!send[i]) {
      result.shards.emplace_back().skipped = true;
      continue;
    }
    wire::PushResponse response;
    grpc::Status parsed =
        grpc::SerializationTraits<wire::PushResponse>::Deserialize(
            &buffers[i]->response, &response);
    if (!parsed.ok()) return FromGrpcStatus(parsed);
    ASSIGN_OR_RETURN(PushReply reply, PushReplyFromProto(response));
    result.shards.push_back(std::move(reply));
  }
  return result;
}

absl::StatusOr<std::vector<ShardStatus>> GrpcPsClient::Status() {
  wire::StatusRequest r;
  r.set_cluster(options_.cluster);
  std::vector<wire::StatusResponse> responses;
  RETURN_IF_ERROR((CallEach<wire::StatusRequest, wire::StatusResponse>(
      "status", &wire::ParameterServer::Stub::async::Status,
      std::vector<wire::StatusRequest>(num_shards(), r), &responses)));
  std::vector<ShardStatus> out;
  for (const wire::StatusResponse& response : responses) {
    out.push_back(ShardStatusFromProto(response));
  }
  return out;
}

absl::Status GrpcPsClient::Shutdown(absl::string_view reason) {
  wire::ShutdownRequest r;
  r.set_cluster(options_.cluster);
  r.set_reason(std::string(reason));
  std::vector<wire::ShutdownResponse> responses;
  return CallEach<wire::ShutdownRequest, wire::ShutdownResponse>(
      "shutdown", &wire::ParameterServer::Stub::async::Shutdown,
      std::vector<wire::ShutdownRequest>(num_shards(), r), &responses);
}

absl::Status GrpcPsClient::Rollback(int64_t label, int64_t generation) {
  wire::RollbackRequest r;
  r.set_cluster(options_.cluster);
  r.set_label(label);
  r.set_generation(generation);
  std::vector<wire::RollbackResponse> responses;
  return CallEach<wire::RollbackRequest, wire::RollbackResponse>(
      "rollback", &wire::ParameterServer::Stub::async::Rollback,
      std::vector<wire::RollbackRequest>(num_shards(), r), &responses);
}

absl::Status GrpcPsClient::RequestCheckpoint(int64_t label, bool now) {
  wire::CheckpointRequest r;
  r.set_cluster(options_.cluster);
  r.set_label(label);
  r.set_now(now);
  std::vector<wire::CheckpointResponse> responses;
  return CallEach<wire::CheckpointRequest, wire::CheckpointResponse>(
      "checkpoint", &wire::ParameterServer::Stub::async::Checkpoint,
      std::vector<wire::CheckpointRequest>(num_shards(), r), &responses);
}

}  // namespace ps
}  // namespace psgd
