// The gRPC adapter of one ParameterShard: hands each request to the
// shard's ShardRequestHandler (ps/server/request_handler.h, which converts it
// and calls the shard) and returns its status (common/grpc_status.h). Pulls
// that wait for a step hold no thread: the shard answers them from the thread
// that completes the step, and a pull whose gRPC deadline passes (or that the
// client cancels) is withdrawn.
//
// Copies: a Pull's reply is sent straight from the weights snapshot
// (ps/wire/wire_zero_copy.h; the snapshot lives until gRPC has written it), and
// Push requests are parsed into pooled messages whose buffers are reused
// from call to call. A worker on this machine may name a shared memory
// segment (ps/wire/shared_memory.h): its push's gradients are read from it
// in place and its pull's weights copied into it, the reply then carrying
// only where they are.
//
// Authentication: with a token, every call must carry it
// (common/grpc_security.h); one without it, or with another, ends with
// UNAUTHENTICATED before a byte of its request is parsed (every method
// takes raw bytes), so nothing changes and nothing is kept. Each method's
// request then has a size limit of its own (RequestLimit): a Status or a
// ApplyDecisions has no business being hundreds of megabytes. (gRPC's
// health-checking and reflection services, which the server also runs, need no
// token: they reveal whether the server is serving and the public schema of
// proto/ps.proto, nothing of the shard.)
//
// Thread-safety: thread-safe (gRPC calls it from many threads); the shard is
// not owned and must outlive the gRPC server that serves this service.
#ifndef PSGD_PS_SERVER_GRPC_SERVICE_H_
#define PSGD_PS_SERVER_GRPC_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/grpc_security.h"
#include "proto/ps.grpc.pb.h"
#include "ps/server/pull_weights.h"
#include "ps/server/request_handler.h"
#include "ps/server/server_lifecycle.h"
#include "ps/server/ucx_data_plane.h"
#include "ps/shard/decision_relay.h"
#include "ps/shard/shard.h"
#include "ps/wire/shared_memory.h"

namespace psgd {
namespace ps {

// Every method as raw bytes: the token is checked, and the request's size
// against its method's limit (RequestLimit), before a byte is parsed.
using RawParameterServer = wire::ParameterServer::WithRawCallbackMethod_Initialize<
    wire::ParameterServer::WithRawCallbackMethod_Pull<wire::ParameterServer::WithRawCallbackMethod_Push<
        wire::ParameterServer::WithRawCallbackMethod_Commit<wire::ParameterServer::WithRawCallbackMethod_DecidePush<
            wire::ParameterServer::WithRawCallbackMethod_Join<
                wire::ParameterServer::WithRawCallbackMethod_Leave<
                    wire::ParameterServer::WithRawCallbackMethod_Status<
                        wire::ParameterServer::WithRawCallbackMethod_Shutdown<
                            wire::ParameterServer::WithRawCallbackMethod_Rollback<
                                wire::ParameterServer::WithRawCallbackMethod_Checkpoint<
                                    wire::ParameterServer::WithRawCallbackMethod_LeaseData<
                                        wire::ParameterServer::WithRawCallbackMethod_ApplyDecisions<
                                            wire::ParameterServer::
                                                WithRawCallbackMethod_ListCheckpoints<
                                                    wire::ParameterServer::
                                                        CallbackService>>>>>>>>>>>>>>;

// What one method's request may be, checked after the token and before
// the request is parsed: at most `max_bytes` (0: gRPC's own receive limit,
// the server's max_message_bytes), and at most `max_entries` entries of
// its repeated field `field` (0: none counted), counted by skipping over
// the bytes (an entry of an empty submessage takes 2 bytes on the wire and
// about a hundred times that parsed).
struct RequestLimit {
  const char* method;
  int64_t max_bytes;
  int field = 0;
  int64_t max_entries = 0;
};

// RESOURCE_EXHAUSTED naming the method and the limit when `request` is
// over `limit`; INVALID_ARGUMENT when its bytes are no message.
absl::Status CheckRequestLimit(const RequestLimit& limit,
                               const grpc::ByteBuffer& request);

class PsGrpcService final : public RawParameterServer, public ServingCounters {
 public:
  // Every call must carry `token` unless it is empty; ApplyDecisions, the
  // servers' own call, must carry `peer_token` instead (the servers'
  // credential, which workers do not hold; empty: `token`). Pushes and
  // pulls travel in `wire`'s dtypes (ServerOptions::wire).
  explicit PsGrpcService(ParameterShard* shard, std::string token = "",
                         std::string peer_token = "", WireDTypes wire = {});
  ~PsGrpcService() override;

  // Each method takes its request and gives its reply as raw bytes: the
  // token first, then the method's RequestLimit, then the parse (Push's and
  // Pull's comments say what they do beyond that).
  grpc::ServerUnaryReactor* Initialize(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // A PullRequest in, a PullResponse out.
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  // A PushRequest in, a PushResponse out: a caller without the token makes
  // the server allocate nothing beyond gRPC's own read of the message.
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  // A PushRequest in, a PushResponse out, as Push: shard 0 decides it at
  // once (ShardRequestHandler's PushMethod::kDecidePush).
  grpc::ServerUnaryReactor* DecidePush(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // A CommitRequest in, a PushResponse out (ShardRequestHandler::Commit).
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  // Shard 0's decisions (ShardRequestHandler::ApplyDecisions), with the
  // servers' peer token only.
  grpc::ServerUnaryReactor* ApplyDecisions(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Rollback(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* LeaseData(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListCheckpoints(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
      grpc::ByteBuffer* response) override;

  // The limits of each method's request (RequestLimit).
  static const RequestLimit kInitializeLimit, kPullLimit, kCommitLimit,
      kJoinLimit, kLeaveLimit, kStatusLimit, kShutdownLimit,
      kApplyDecisionsLimit, kRollbackLimit, kCheckpointLimit, kLeaseDataLimit,
      kListCheckpointsLimit;

  // The run directory: the first non-empty value given here or carried by
  // an Initialize request; reported by Status.
  void SetRunDirIfUnset(absl::string_view run_dir) {
    handler_.SetRunDirIfUnset(run_dir);
  }
  std::string run_dir() const override { return handler_.run_dir(); }
  // Where an Initialize's run directory may lie (ShardRequestHandler).
  void SetRunRoot(absl::string_view run_root) { handler_.SetRunRoot(run_root); }

  // The UCX data plane (wire { data_plane: UCX }), before the service
  // serves: a worker's Join also gives it its key there, a Leave takes it
  // back. Not owned; must outlive every call.
  void SetUcxDataPlane(UcxDataPlane* ucx) { ucx_ = ucx; }
  // The tensors pulls are answered with (shared with the UCX data plane).
  PullWeights* pull_weights() { return pull_weights_.get(); }

  // Calls refused for a missing or wrong token so far.
  int64_t unauthenticated_calls() const override {
    return authenticator_.refused() + peer_authenticator_.refused();
  }

  // Payload bytes of pushes and pulls so far: received (requests) and sent
  // (replies), as gRPC carried them (before its framing and compression).
  int64_t payload_received_bytes() const override {
    return received_bytes_.load(std::memory_order_relaxed);
  }
  int64_t payload_sent_bytes() const override {
    return sent_bytes_.load(std::memory_order_relaxed);
  }
  void AddServingMemory(ShardMemory* memory) const override;
  // The payload bytes over gRPC, and with the UCX data plane its counts
  // (ucx_pushes, ucx_pulls, and what it dropped: ucx_bad_key,
  // ucx_wrong_worker, ucx_malformed, ucx_receive_failed).
  void AddSummary(JsonObject* summary) const override;

  // Workers' shared memory regions mapped now (wire { shared_memory }).
  size_t shared_segments_mapped() const { return shared_segments_->count(); }

  // Tests: no worker's shared memory can be reached (a server on another
  // machine). Before the first call.
  void SetSharedMemoryUnreachableForTesting() {
    shared_segments_ = std::make_unique<SharedSegments>(false);
  }

 private:
  // Push and DecidePush.
  grpc::ServerUnaryReactor* ServePush(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response,
                                      PushMethod method);
  class PushMessagePool;

  // Finishes the call: the token checked, then `limit`, then `request`
  // parsed as a Request and handed to `handle(const Request&, Response*)`,
  // whose reply is written to `response` when its status is OK.
  template <typename Request, typename Response, typename Handle>
  grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* ctx,
                                    const RequestLimit& limit,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response, Handle handle) {
    return Respond<Request, Response>(&authenticator_, ctx, limit, request,
                                      response, std::move(handle));
  }
  // The same with the token `authenticator` checks.
  template <typename Request, typename Response, typename Handle>
  grpc::ServerUnaryReactor* Respond(CallAuthenticator* authenticator,
                                    grpc::CallbackServerContext* ctx,
                                    const RequestLimit& limit,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response, Handle handle);

  CallAuthenticator authenticator_;
  CallAuthenticator peer_authenticator_;  // ApplyDecisions'
  ShardRequestHandler handler_;
  std::atomic<int64_t> received_bytes_{0};
  // Bytes of the push requests being handled now.
  std::atomic<int64_t> push_bytes_in_flight_{0};
  std::atomic<int64_t> sent_bytes_{0};
  // Shared with the messages a shard keeps staged (they go back to it when
  // the shard drops them, possibly after this service is gone).
  const std::shared_ptr<PushMessagePool> push_messages_;
  // The tensors pulls are answered with.
  const std::unique_ptr<PullWeights> pull_weights_;
  UcxDataPlane* ucx_ = nullptr;
  // Workers' shared memory segments (wire { shared_memory }).
  std::unique_ptr<SharedSegments> shared_segments_ =
      std::make_unique<SharedSegments>();
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_GRPC_SERVICE_H_
