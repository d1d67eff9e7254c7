// The PsClient of a worker that reaches S parameter-server processes over
// gRPC: every call goes to all shards in parallel (callback stubs), pushes
// and pulls reuse their messages' buffers from one call to the next, and
// each worker's client has its own connections.
//
// Thread-safety: thread-compatible: one thread at a time per client (each
// worker has its own); distinct clients may be used concurrently. PullPart
// and PushPart are the exception: they may run on several threads at once,
// also beside one other call (they use buffers of their own).
#ifndef PSGD_PS_CLIENT_GRPC_CLIENT_H_
#define PSGD_PS_CLIENT_GRPC_CLIENT_H_

#include <functional>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grpc_security.h"
#include "common/model_variables.h"
#include "proto/ps.grpc.pb.h"
#include "ps/state/placement.h"
#include "ps/client/ps_client.h"

namespace psgd {
namespace ps {

// A channel to a parameter server (or a peer under test) with the message
// limits raised to max_message_bytes and connections of its own, as a
// worker process has, even when several clients share a process; TLS and
// the token as `credentials` say (common/grpc_security.h; default:
// plaintext, no token). When the server goes away the channel reconnects by
// itself, trying again at most every second (a restarted server is found
// quickly; the client object stays as it is).
std::shared_ptr<grpc::Channel> CreatePsChannel(
    const std::string& address, int64_t max_message_bytes,
    const ClientCredentials& credentials = ClientCredentials());

// start(i, context, done) begins call i with `context`; done must run once.
using StartCall = std::function<void(int, grpc::ClientContext*,
                                     std::function<void(grpc::Status)>)>;

// One call to each of `addresses` in parallel, all with `deadline`; waits
// for all (every call ends by its deadline) and returns the first error,
// prefixed with `what` and the address.
absl::Status CallInParallel(const std::vector<std::string>& addresses,
                            absl::string_view what, absl::Time deadline,
                            const StartCall& start);

struct GrpcClientOptions {
  // Shard i listens at addresses[i] ("host:port").
  std::vector<std::string> addresses;
  // Sent with every request.
  std::string cluster = "psgd";
  // This client's worker; -1 for none (a chief that only initialises or
  // shuts down, an evaluator).
  int worker_id = -1;
  // The model and the servers' split threshold: the placement is computed
  // from them (ps/state/placement.h).
  std::vector<VariableSpec> variables;
  int64_t split_threshold_bytes = int64_t{1} << 20;
  // gRPC send and receive limit, as the servers'.
  int64_t max_message_bytes = int64_t{256} << 20;
  // Deadline of every call but Pull (which takes its own).
  absl::Duration rpc_timeout = absl::Seconds(60);
  // Sent with Initialize: the run directory the servers and the other
  // workers use when they were given none (see proto/ps.proto).
  std::string run_dir;
  // The element types on the wire, as the servers' (the cluster config's
  // `wire` block): gradients are pushed as wire_gradients, pulled weights
  // must come as wire_weights (docs/PS.md, "Wire dtypes").
  DType wire_gradients = DType::kFloat32;
  DType wire_weights = DType::kFloat32;
  // The cluster's token, sent with every call, and TLS (tls, tls_ca_file;
  // the certificate and key are the servers'). Default: neither.
  SecurityOptions security;
};

class GrpcPsClient final : public PsClient {
 public:
  // Computes the placement and opens a channel to each address (connecting
  // lazily). INVALID_ARGUMENT for no address, a bad variable list or limits;
  // NOT_FOUND / INTERNAL for a TLS CA file that cannot be read. A server
  // that refuses the token answers every call with UNAUTHENTICATED.
  static absl::StatusOr<std::unique_ptr<GrpcPsClient>> Create(
      GrpcClientOptions options);
  ~GrpcPsClient() override;

  const Placement& placement() const override { return placement_; }
  absl::Status Initialize(
      absl::Span<const NamedConstTensorView> variables) override;
  absl::Status Join() override;
  absl::Status Leave() override;
  absl::StatusOr<ModelVersion> Pull(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  absl::StatusOr<PushResult> Push(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  absl::StatusOr<ModelVersion> PullPart(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  absl::StatusOr<PushResult> PushPart(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  absl::StatusOr<std::vector<ShardStatus>> Status() override;
  absl::Status Shutdown(absl::string_view reason) override;
  absl::Status Rollback(int64_t label, int64_t generation) override;
  absl::Status RequestCheckpoint(int64_t label, bool now) override;

  // The serialized bytes of the pushes and pulls so far: what this worker
  // sent (push requests, pull requests) and received (pull and push
  // responses), payload without gRPC's framing. Thread-safe.
  struct PayloadBytes {
    int64_t sent = 0;
    int64_t received = 0;
  };
  PayloadBytes payload_bytes() const {
    return {sent_bytes_.load(std::memory_order_relaxed),
            received_bytes_.load(std::memory_order_relaxed)};
  }

 private:
  struct CallBuffers;
  struct Shard;
  template <typename Request, typename Response>
  using AsyncMethod = void (wire::ParameterServer::Stub::async::*)(
      grpc::ClientContext*, const Request*, Response*,
      std::function<void(grpc::Status)>);

  GrpcPsClient(GrpcClientOptions options, Placement placement);

  // Sends requests[i] to shard i through `method`, all in parallel, with
  // the rpc timeout; the first error names the shard.
  template <typename Request, typename Response>
  absl::Status CallEach(absl::string_view what,
                        AsyncMethod<Request, Response> method,
                        const std::vector<Request>& requests,
                        std::vector<Response>* responses);
  // Pull / PullPart and Push / PushPart once `model` is ordered (a part's
  // other variables null), with one CallBuffers per shard.
  absl::StatusOr<ModelVersion> PullModel(const ModelVersion& min_version,
                                         absl::Time deadline,
                                         absl::Span<float* const> model,
                                         bool part,
                                         absl::Span<CallBuffers* const> buffers);
  absl::StatusOr<PushResult> PushModel(const ModelVersion& version,
                                       absl::Span<const float* const> model,
                                       bool part,
                                       absl::Span<CallBuffers* const> buffers);
  // Join or Leave on every shard.
  template <typename Request>
  absl::Status ChangeMembership(
      absl::string_view what,
      AsyncMethod<Request, wire::MembershipResponse> method);

  const GrpcClientOptions options_;
  const Placement placement_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<int64_t> sent_bytes_{0};
  std::atomic<int64_t> received_bytes_{0};
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_GRPC_CLIENT_H_
