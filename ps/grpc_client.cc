#include "ps/grpc_client.h"

#include <grpc/grpc.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "ps/model_slices.h"
#include "ps/mutex.h"
#include "ps/wire.h"

namespace psgd {
namespace ps {

struct GrpcPsClient::Shard {
  std::string address;
  std::unique_ptr<wire::ParameterServer::Stub> stub;
  // Reused from call to call: their byte buffers keep their capacity.
  wire::PushRequest push_request;
  wire::PushResponse push_response;
  wire::PullRequest pull_request;
  wire::PullResponse pull_response;
};

namespace {

// start(shard, context, done) begins shard's call; done must run once.
using StartCall = std::function<void(int, grpc::ClientContext*,
                                     std::function<void(grpc::Status)>)>;

// One call to every shard in parallel, all with `deadline`; waits for all
// and returns the first error, prefixed with what and where.
absl::Status CallAllShards(int num_shards,
                           const std::vector<std::string>& addresses,
                           absl::string_view what, absl::Time deadline,
                           const StartCall& start) {
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

}  // namespace

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
  std::unique_ptr<GrpcPsClient> client(
      new GrpcPsClient(std::move(options), std::move(placement)));
  for (const std::string& address : client->options_.addresses) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(
        static_cast<int>(client->options_.max_message_bytes));
    args.SetMaxSendMessageSize(
        static_cast<int>(client->options_.max_message_bytes));
    // Its own connections, as a worker process has, even when several
    // clients live in one process (tests, ps_bench).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto shard = std::make_unique<Shard>();
    shard->address = address;
    shard->stub = wire::ParameterServer::NewStub(grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args));
    client->shards_.push_back(std::move(shard));
  }
  return client;
}

GrpcPsClient::GrpcPsClient(GrpcClientOptions options, Placement placement)
    : options_(std::move(options)), placement_(std::move(placement)) {}

GrpcPsClient::~GrpcPsClient() = default;

absl::Status GrpcPsClient::Initialize(
    absl::Span<const NamedConstTensorView> variables) {
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, variables, &model));
  std::vector<wire::InitializeRequest> requests(num_shards());
  std::vector<wire::InitializeResponse> responses(num_shards());
  for (int i = 0; i < num_shards(); ++i) {
    requests[i].set_cluster(options_.cluster);
    TensorBytesToProto(ShardSlices(placement_, i, model),
                       requests[i].mutable_variables());
  }
  return CallAllShards(num_shards(), options_.addresses, "initialize",
                       absl::Now() + options_.rpc_timeout,
                       [&](int i, grpc::ClientContext* ctx, auto done) {
                         shards_[i]->stub->async()->Initialize(
                             ctx, &requests[i], &responses[i], std::move(done));
                       });
}

absl::Status GrpcPsClient::Join() {
  std::vector<wire::JoinRequest> requests(num_shards());
  std::vector<wire::MembershipResponse> responses(num_shards());
  for (wire::JoinRequest& r : requests) {
    r.set_cluster(options_.cluster);
    r.set_worker_id(options_.worker_id);
  }
  return CallAllShards(num_shards(), options_.addresses, "join",
                       absl::Now() + options_.rpc_timeout,
                       [&](int i, grpc::ClientContext* ctx, auto done) {
                         shards_[i]->stub->async()->Join(
                             ctx, &requests[i], &responses[i], std::move(done));
                       });
}

absl::Status GrpcPsClient::Leave() {
  std::vector<wire::LeaveRequest> requests(num_shards());
  std::vector<wire::MembershipResponse> responses(num_shards());
  for (wire::LeaveRequest& r : requests) {
    r.set_cluster(options_.cluster);
    r.set_worker_id(options_.worker_id);
  }
  return CallAllShards(num_shards(), options_.addresses, "leave",
                       absl::Now() + options_.rpc_timeout,
                       [&](int i, grpc::ClientContext* ctx, auto done) {
                         shards_[i]->stub->async()->Leave(
                             ctx, &requests[i], &responses[i], std::move(done));
                       });
}

absl::StatusOr<ModelVersion> GrpcPsClient::Pull(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  RETURN_IF_ERROR(CheckVersion(min_version, num_shards()));
  std::vector<float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, out, &model));
  for (int i = 0; i < num_shards(); ++i) {
    wire::PullRequest& r = shards_[i]->pull_request;
    r.set_cluster(options_.cluster);
    r.set_min_step(min_version.steps[i]);
    r.set_worker_id(options_.worker_id);
  }
  RETURN_IF_ERROR(
      CallAllShards(num_shards(), options_.addresses, "pull", deadline,
                    [&](int i, grpc::ClientContext* ctx, auto done) {
                      Shard& s = *shards_[i];
                      s.stub->async()->Pull(ctx, &s.pull_request,
                                            &s.pull_response, std::move(done));
                    }));
  ModelVersion version = ModelVersion::AtLeast(num_shards(), 0);
  for (int i = 0; i < num_shards(); ++i) {
    const wire::PullResponse& r = shards_[i]->pull_response;
    ASSIGN_OR_RETURN(std::vector<TensorBytes> pulled,
                     TensorBytesFromProto(r.variables()));
    RETURN_IF_ERROR(AssembleShard(placement_, i, pulled, model));
    version.steps[i] = r.step();
  }
  return version;
}

absl::StatusOr<PushResult> GrpcPsClient::Push(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, gradients, &model));
  for (int i = 0; i < num_shards(); ++i) {
    wire::PushRequest& r = shards_[i]->push_request;
    r.set_cluster(options_.cluster);
    r.set_worker_id(options_.worker_id);
    r.set_step(version.steps[i]);
    TensorBytesToProto(ShardSlices(placement_, i, model),
                       r.mutable_gradients());
  }
  RETURN_IF_ERROR(
      CallAllShards(num_shards(), options_.addresses, "push",
                    absl::Now() + options_.rpc_timeout,
                    [&](int i, grpc::ClientContext* ctx, auto done) {
                      Shard& s = *shards_[i];
                      s.stub->async()->Push(ctx, &s.push_request,
                                            &s.push_response, std::move(done));
                    }));
  PushResult result;
  for (int i = 0; i < num_shards(); ++i) {
    ASSIGN_OR_RETURN(PushReply reply,
                     PushReplyFromProto(shards_[i]->push_response));
    result.shards.push_back(std::move(reply));
  }
  return result;
}

absl::StatusOr<std::vector<ShardStatus>> GrpcPsClient::Status() {
  std::vector<wire::StatusRequest> requests(num_shards());
  std::vector<wire::StatusResponse> responses(num_shards());
  for (wire::StatusRequest& r : requests) r.set_cluster(options_.cluster);
  RETURN_IF_ERROR(
      CallAllShards(num_shards(), options_.addresses, "status",
                    absl::Now() + options_.rpc_timeout,
                    [&](int i, grpc::ClientContext* ctx, auto done) {
                      shards_[i]->stub->async()->Status(
                          ctx, &requests[i], &responses[i], std::move(done));
                    }));
  std::vector<ShardStatus> out;
  for (const wire::StatusResponse& r : responses) {
    out.push_back(ShardStatusFromProto(r));
  }
  return out;
}

absl::Status GrpcPsClient::Shutdown(absl::string_view reason) {
  std::vector<wire::ShutdownRequest> requests(num_shards());
  std::vector<wire::ShutdownResponse> responses(num_shards());
  for (wire::ShutdownRequest& r : requests) {
    r.set_cluster(options_.cluster);
    r.set_reason(std::string(reason));
  }
  return CallAllShards(num_shards(), options_.addresses, "shutdown",
                       absl::Now() + options_.rpc_timeout,
                       [&](int i, grpc::ClientContext* ctx, auto done) {
                         shards_[i]->stub->async()->Shutdown(
                             ctx, &requests[i], &responses[i], std::move(done));
                       });
}

}  // namespace ps
}  // namespace psgd
