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
// UNAUTHENTICATED before its request reaches the handler, so nothing
// changes. (gRPC's health-checking and reflection services, which the
// server also runs, need no token: they reveal whether the server is
// serving and the public schema of proto/ps.proto, nothing of the shard.)
//
// Thread-safety: thread-safe (gRPC calls it from many threads); the shard is
// not owned and must outlive the gRPC server that serves this service.
#ifndef PSGD_PS_SERVER_GRPC_SERVICE_H_
#define PSGD_PS_SERVER_GRPC_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "common/grpc_security.h"
#include "proto/ps.grpc.pb.h"
#include "ps/server/pull_weights.h"
#include "ps/server/request_handler.h"
#include "ps/server/server_lifecycle.h"
#include "ps/server/ucx_data_plane.h"
#include "ps/shard/shard.h"
#include "ps/wire/shared_memory.h"

namespace psgd {
namespace ps {

class PsGrpcService final
    : public wire::ParameterServer::WithRawCallbackMethod_Pull<
          wire::ParameterServer::WithRawCallbackMethod_Push<
              wire::ParameterServer::CallbackService>>,
      public ServingCounters {
 public:
  // Every call must carry `token` unless it is empty.
  explicit PsGrpcService(ParameterShard* shard, std::string token = "");
  ~PsGrpcService() override;

  grpc::ServerUnaryReactor* Initialize(
      grpc::CallbackServerContext* ctx, const wire::InitializeRequest* request,
      wire::InitializeResponse* response) override;
  // A PullRequest in, a PullResponse out, as raw bytes.
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  // A PushRequest in, a PushResponse out, as raw bytes: the token is
  // checked before a byte is parsed, so a caller without it makes the
  // server allocate nothing beyond gRPC's own read of the message.
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx,
                                 const wire::JoinRequest* request,
                                 wire::MembershipResponse* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* ctx,
                                  const wire::LeaveRequest* request,
                                  wire::MembershipResponse* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx,
                                   const wire::StatusRequest* request,
                                   wire::StatusResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const wire::ShutdownRequest* request,
                                     wire::ShutdownResponse* response) override;
  grpc::ServerUnaryReactor* Decide(grpc::CallbackServerContext* ctx,
                                   const wire::DecideRequest* request,
                                   wire::DecideResponse* response) override;
  grpc::ServerUnaryReactor* Rollback(grpc::CallbackServerContext* ctx,
                                     const wire::RollbackRequest* request,
                                     wire::RollbackResponse* response) override;
  grpc::ServerUnaryReactor* Checkpoint(
      grpc::CallbackServerContext* ctx, const wire::CheckpointRequest* request,
      wire::CheckpointResponse* response) override;
  grpc::ServerUnaryReactor* LeaseData(
      grpc::CallbackServerContext* ctx, const wire::LeaseDataRequest* request,
      wire::LeaseDataResponse* response) override;
  grpc::ServerUnaryReactor* ListCheckpoints(
      grpc::CallbackServerContext* ctx,
      const wire::ListCheckpointsRequest* request,
      wire::ListCheckpointsResponse* response) override;

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
    return authenticator_.refused();
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
  class PushMessagePool;

  // Finishes the call with the status of `handle()`, which runs only when
  // the call passes the token check.
  template <typename Handle>
  grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* ctx,
                                    Handle handle);

  CallAuthenticator authenticator_;
  ShardRequestHandler handler_;
  std::atomic<int64_t> received_bytes_{0};
  // Bytes of the push requests being handled now.
  std::atomic<int64_t> push_bytes_in_flight_{0};
  std::atomic<int64_t> sent_bytes_{0};
  const std::unique_ptr<PushMessagePool> push_messages_;
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
