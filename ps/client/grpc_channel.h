// One parameter-server shard over gRPC: the ShardChannel of RemotePsClient
// (ps/client/remote_client.h). Callback stubs, so that a client starts a call
// on every shard before it waits; Push and Pull go as raw bytes
// (ps/wire/wire_zero_copy.h): a push's tensors are referenced by the request,
// not copied, and a pull's are copied once, from gRPC's buffers to their
// place in the model. With shared memory (a server on this machine), a
// push's tensors are copied once into the exchange's region and a pull's
// once out of it, and gRPC carries the rest. Counts the payload bytes of
// pushes and pulls.
//
// Thread-safety: as ShardChannel (ps/client/shard_channel.h); payload_bytes()
// may be called at any time.
#ifndef PSGD_PS_CLIENT_GRPC_CHANNEL_H_
#define PSGD_PS_CLIENT_GRPC_CHANNEL_H_

#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/grpc_security.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "ps/client/shard_channel.h"

namespace psgd {
class ThreadPool;
namespace ps {

// A channel to a parameter server (or a peer under test) with the message
// limits raised to max_message_bytes (which must fit in an int) and
// connections of its own, as a worker process has, even when several clients
// share a process; TLS and the token as `credentials` say
// (common/grpc_security.h; default: plaintext, no token). When the server goes
// away the channel reconnects by itself, trying again at most every second (a
// restarted server is found quickly; the client object stays as it is).
std::shared_ptr<grpc::Channel> CreatePsChannel(
    const std::string& address, int64_t max_message_bytes,
    const ClientCredentials& credentials = ClientCredentials());

// start(i, context, done) begins call i with `context`; done must run once.
using StartCall = std::function<void(int, grpc::ClientContext*,
                                     std::function<void(grpc::Status)>)>;

// One call to each of `addresses` in parallel, all with `deadline`; waits
// for all (every call ends by its deadline) and returns the first error,
// prefixed with `what` and the address. (ps_bench's echo rounds.)
absl::Status CallInParallel(const std::vector<std::string>& addresses,
                            absl::string_view what, absl::Time deadline,
                            const StartCall& start);

class GrpcShardChannel final : public ShardChannel {
 public:
  // Shard `shard` at `address`, over `channel` (CreatePsChannel); with
  // `shared_memory`, pushes and pulls offer the server a shared memory
  // segment (ps/wire/shared_memory.h) and use it once a pull shows that the
  // server can open it; the first refusal (logged once) turns it off for
  // the channel.
  GrpcShardChannel(int shard, const std::string& address,
                   const std::shared_ptr<grpc::Channel>& channel,
                   bool shared_memory = false);
  ~GrpcShardChannel() override;

  const std::string& name() const override { return name_; }
  std::unique_ptr<ShardCall> Initialize(
      const wire::InitializeRequest& request, absl::Time deadline,
      wire::InitializeResponse* response) override;
  std::unique_ptr<ShardCall> Join(const wire::JoinRequest& request,
                                  absl::Time deadline,
                                  wire::MembershipResponse* response) override;
  std::unique_ptr<ShardCall> Leave(const wire::LeaveRequest& request,
                                   absl::Time deadline,
                                   wire::MembershipResponse* response) override;
  std::unique_ptr<ShardCall> Status(const wire::StatusRequest& request,
                                    absl::Time deadline,
                                    wire::StatusResponse* response) override;
  std::unique_ptr<ShardCall> Shutdown(
      const wire::ShutdownRequest& request, absl::Time deadline,
      wire::ShutdownResponse* response) override;
  std::unique_ptr<ShardCall> Rollback(
      const wire::RollbackRequest& request, absl::Time deadline,
      wire::RollbackResponse* response) override;
  std::unique_ptr<ShardCall> Checkpoint(
      const wire::CheckpointRequest& request, absl::Time deadline,
      wire::CheckpointResponse* response) override;
  std::unique_ptr<ShardCall> LeaseData(
      const wire::LeaseDataRequest& request, absl::Time deadline,
      wire::LeaseDataResponse* response) override;
  std::unique_ptr<ShardCall> Health(absl::Time deadline,
                                    bool* serving) override;
  std::unique_ptr<ShardExchange> NewExchange() override;

  // The serialized bytes of the pushes and pulls so far: sent (push and
  // pull requests) and received (their responses), payload without gRPC's
  // framing.
  int64_t sent_bytes() const {
    return sent_bytes_.load(std::memory_order_relaxed);
  }
  int64_t received_bytes() const {
    return received_bytes_.load(std::memory_order_relaxed);
  }
  // Of those, the tensor bytes that went through shared memory.
  int64_t shared_sent_bytes() const {
    return shared_sent_bytes_.load(std::memory_order_relaxed);
  }
  int64_t shared_received_bytes() const {
    return shared_received_bytes_.load(std::memory_order_relaxed);
  }

 private:
  class Exchange;
  // Shared memory with this shard: not asked for, not known yet (pulls
  // offer a region), the server opened one (pushes use it too), refused.
  enum class SharedState { kOff, kUnknown, kConfirmed, kRefused };
  SharedState shared_state() const {
    return shared_state_.load(std::memory_order_relaxed);
  }
  void ConfirmShared();
  void RefuseShared(absl::string_view why);

  template <typename Request, typename Response>
  using AsyncMethod = void (wire::ParameterServer::Stub::async::*)(
      grpc::ClientContext*, const Request*, Response*,
      std::function<void(grpc::Status)>);

  template <typename Request, typename Response>
  std::unique_ptr<ShardCall> Start(AsyncMethod<Request, Response> method,
                                   const Request& request, absl::Time deadline,
                                   Response* response);

  const std::string name_;
  const std::unique_ptr<wire::ParameterServer::Stub> stub_;
  const std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  // Push and Pull as raw bytes.
  const std::unique_ptr<grpc::GenericStub> raw_;
  std::atomic<int64_t> sent_bytes_{0};
  std::atomic<int64_t> received_bytes_{0};
  std::atomic<int64_t> shared_sent_bytes_{0};
  std::atomic<int64_t> shared_received_bytes_{0};
  std::atomic<SharedState> shared_state_;
  // With shared memory: the threads that copy a push's gradients into the
  // region and a pull's weights out of it (the machine's cores, at most 4;
  // they sleep between copies). Null without.
  const std::unique_ptr<ThreadPool> copy_pool_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_GRPC_CHANNEL_H_
