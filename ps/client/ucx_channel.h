// One parameter-server shard with the UCX data plane (cluster config
// `wire { data_plane: UCX }`, docs/PS.md "Tensors over UCX"): pushes' and
// pulls' tensors as UCX active messages (ps/ucx/messenger.h) to the server's
// UCX listener (ps/server/ucx_data_plane.h), every other call over the gRPC
// channel it wraps (ps/client/grpc_channel.h).
//
// The server says where its listener is, and gives this worker its key, in
// the answer to Join (over gRPC, with the cluster's token and TLS); the
// channel connects then, and presents its key at once (a withdrawal of no
// pull): the server closes a connection that has presented none within a
// few seconds. Until a Join has said so (a chief, a server
// without UCX or whose UCX could not start), pushes and pulls go over gRPC.
// A UCX call that ends UNAVAILABLE (the server's process gone) marks the
// link broken: the worker's recovery joins again (ps/client/ps_client.h's
// callers do), saying that it connects anew (JoinRequest.ucx_new_link), and
// that Join's answer connects. A pull given up on (its deadline passed, or
// Cancel) is withdrawn from the server (method 3), as gRPC cancels a call's
// server side: the shard does not answer it when its step comes.
//
// On the wire: ps/server/ucx_data_plane.h. A push's tensors are sent from
// the caller's memory (held until UCX lets go of it); a pull's are copied
// once, from the received message to their place in the model.
//
// Thread-safety: as ShardChannel (ps/client/shard_channel.h).
#ifndef PSGD_PS_CLIENT_UCX_CHANNEL_H_
#define PSGD_PS_CLIENT_UCX_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "ps/client/grpc_channel.h"
#include "ps/client/shard_channel.h"
#include "ps/ucx/messenger.h"

namespace psgd {
namespace ps {

class UcxShardChannel final : public ShardChannel {
 public:
  // `control` carries every call but the tensors; `messenger` is the
  // client's (shared by its channels); `host` is the server's host as
  // `control` dials it.
  UcxShardChannel(std::unique_ptr<GrpcShardChannel> control,
                  std::shared_ptr<ucx::Messenger> messenger, std::string host);
  ~UcxShardChannel() override;

  const std::string& name() const override { return control_->name(); }
  std::unique_ptr<ShardCall> Initialize(
      const wire::InitializeRequest& request, absl::Time deadline,
      wire::InitializeResponse* response) override {
    return control_->Initialize(request, deadline, response);
  }
  // Join, and once it is awaited with OK, the link its answer names.
  std::unique_ptr<ShardCall> Join(const wire::JoinRequest& request,
                                  absl::Time deadline,
                                  wire::MembershipResponse* response) override;
  // Leave, and once it is awaited with OK, no link: the server has
  // revoked the worker's key, and what the worker still pulls goes over
  // gRPC.
  std::unique_ptr<ShardCall> Leave(const wire::LeaveRequest& request,
                                   absl::Time deadline,
                                   wire::MembershipResponse* response) override;
  std::unique_ptr<ShardCall> Status(const wire::StatusRequest& request,
                                    absl::Time deadline,
                                    wire::StatusResponse* response) override {
    return control_->Status(request, deadline, response);
  }
  std::unique_ptr<ShardCall> Shutdown(
      const wire::ShutdownRequest& request, absl::Time deadline,
      wire::ShutdownResponse* response) override {
    return control_->Shutdown(request, deadline, response);
  }
  std::unique_ptr<ShardCall> Rollback(
      const wire::RollbackRequest& request, absl::Time deadline,
      wire::RollbackResponse* response) override {
    return control_->Rollback(request, deadline, response);
  }
  std::unique_ptr<ShardCall> Checkpoint(
      const wire::CheckpointRequest& request, absl::Time deadline,
      wire::CheckpointResponse* response) override {
    return control_->Checkpoint(request, deadline, response);
  }
  std::unique_ptr<ShardCall> LeaseData(
      const wire::LeaseDataRequest& request, absl::Time deadline,
      wire::LeaseDataResponse* response) override {
    return control_->LeaseData(request, deadline, response);
  }
  std::unique_ptr<ShardCall> Health(absl::Time deadline,
                                    bool* serving) override {
    return control_->Health(deadline, serving);
  }
  std::unique_ptr<ShardExchange> NewExchange() override;

  const GrpcShardChannel& control() const { return *control_; }
  // Whether pushes and pulls go over UCX now.
  bool linked() const;
  // Payload bytes of the pushes and pulls that went over UCX: sent
  // (requests) and received (replies), headers included.
  int64_t ucx_sent_bytes() const { return ucx_sent_bytes_.load(); }
  int64_t ucx_received_bytes() const { return ucx_received_bytes_.load(); }

 private:
  class Exchange;
  class MembershipCall;
  struct Link {
    uint64_t peer = 0;
    ucx::Key key{};
    int port = 0;
    bool broken = false;
  };

  // After a Join answered with OK: connects when the answer names another
  // listener or key, or the link is broken.
  void Adopt(const wire::MembershipResponse& response);
  void Unlink();
  std::optional<Link> CurrentLink() const;
  void MarkBroken(uint64_t peer);

  const std::unique_ptr<GrpcShardChannel> control_;
  const std::shared_ptr<ucx::Messenger> messenger_;
  const std::string host_;
  mutable Mutex mu_;
  std::optional<Link> link_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> ucx_sent_bytes_{0};
  std::atomic<int64_t> ucx_received_bytes_{0};
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_UCX_CHANNEL_H_
