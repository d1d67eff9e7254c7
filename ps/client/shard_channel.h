// One parameter-server shard as the sharded client (ps/client/sharded_client.h)
// reaches it: the requests and responses of proto/ps.proto, sent over gRPC
// (ps/client/grpc_channel.h) or handed to the shard's request handler in this
// process (ps/testing/in_process_client.h). A channel only carries calls: which
// shards to call, what to send each and what to make of the replies is the
// sharded client's, written once for both.
//
// Every call is started and later awaited, so that the client can start one
// on every shard before it waits for any. A call ends by its deadline at the
// latest. The statuses are the shard's (ps/shard/shard.h, through its request
// handler, ps/server/request_handler.h), plus UNAVAILABLE and DEADLINE_EXCEEDED
// from the transport; they do not name the shard (the client prefixes the
// channel's name()).
//
// Thread-safety: a ShardChannel is thread-safe; a ShardCall and a
// ShardExchange are used by one thread at a time (but an exchange's Cancel,
// from any thread). A request, a response and
// the memory a push references must stay valid until the call is awaited.
#ifndef PSGD_PS_CLIENT_SHARD_CHANNEL_H_
#define PSGD_PS_CLIENT_SHARD_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"
#include "ps/client/model_slices.h"
#include "ps/state/types.h"
#include "ps/wire/wire.h"

namespace psgd {
namespace ps {

// A call under way. Destroying one that was not awaited waits for it.
class ShardCall {
 public:
  virtual ~ShardCall() = default;
  // Blocks until the call has ended and returns its status. Once only.
  virtual absl::Status Await() = 0;
};

// A ShardCall that has already ended with `status` (a call made
// synchronously, or refused before it started).
std::unique_ptr<ShardCall> FinishedCall(absl::Status status);

// What a pull's response says besides its tensors.
struct PulledVersion {
  int64_t step = 0;
  int64_t generation = 0;
  // How long the shard held the pull before its step was reached.
  absl::Duration wait = absl::ZeroDuration();
  // PullResponse.learning_rate.
  double learning_rate = 0.0;
};

// Pushes and pulls to one shard, one at a time, with buffers that are kept
// from call to call (a worker pushes and pulls every step). Start a call,
// Await it, then read its reply.
class ShardExchange {
 public:
  virtual ~ShardExchange() = default;

  // Sends `header` (a PushRequest with every field but the gradients) with
  // `gradients`, already in the wire dtype. Their memory may be referenced
  // rather than copied: `in_use` is held as long as it is, which may be a
  // little past Await (the transport lets go of it in its own time); the
  // caller learns when from in_use's deleter. `method`: the Push call, or
  // DecidePush (shard 0 of several decides the whole push at once; the
  // other shards must have staged it).
  virtual void StartPush(const wire::PushRequest& header,
                         absl::Span<const TensorBytes> gradients,
                         std::shared_ptr<const void> in_use,
                         absl::Time deadline, PushMethod method) = 0;
  virtual void StartPull(const wire::PullRequest& request,
                         absl::Time deadline) = 0;
  // Commits a push every shard has staged (shard 0 of a cluster of several
  // shards decides it); its reply is read with ReadPush.
  virtual void StartCommit(const wire::CommitRequest& request,
                           absl::Time deadline) = 0;

  // Blocks until the started call has ended; its status.
  virtual absl::Status Await() = 0;

  // From any thread: ends the call under way now, its Await answering
  // CANCELLED (a pull that waits for its step is withdrawn from the
  // shard). Nothing when no call is under way or it has already ended.
  virtual void Cancel() = 0;

  // After a push or a commit was awaited with OK: the shard's response.
  // DATA_LOSS for bytes that are no PushResponse.
  virtual absl::Status ReadPush(wire::PushResponse* response) = 0;
  // After a pull was awaited with OK: the response's version into
  // `version`, its tensors, as they came, through `assembler`
  // (Destination, then Done; not Finish). DATA_LOSS for bytes that are no
  // PullResponse; the assembler's errors and the shard's selection of the
  // tensors asked for (INVALID_ARGUMENT naming the tensor) as they are.
  virtual absl::Status ReadPull(PulledVersion* version,
                                ShardAssembler* assembler) = 0;
};

class ShardChannel {
 public:
  virtual ~ShardChannel() = default;

  // How errors name the shard: "shard 1 at 10.0.0.2:5000", "shard 1".
  virtual const std::string& name() const = 0;

  // The unary calls of proto/ps.proto (but Push and Pull), started.
  // `request` and `response` are borrowed until the call is awaited.
  virtual std::unique_ptr<ShardCall> Initialize(
      const wire::InitializeRequest& request, absl::Time deadline,
      wire::InitializeResponse* response) = 0;
  virtual std::unique_ptr<ShardCall> Join(
      const wire::JoinRequest& request, absl::Time deadline,
      wire::MembershipResponse* response) = 0;
  virtual std::unique_ptr<ShardCall> Leave(
      const wire::LeaveRequest& request, absl::Time deadline,
      wire::MembershipResponse* response) = 0;
  virtual std::unique_ptr<ShardCall> Status(const wire::StatusRequest& request,
                                            absl::Time deadline,
                                            wire::StatusResponse* response) = 0;
  virtual std::unique_ptr<ShardCall> Shutdown(
      const wire::ShutdownRequest& request, absl::Time deadline,
      wire::ShutdownResponse* response) = 0;
  virtual std::unique_ptr<ShardCall> Rollback(
      const wire::RollbackRequest& request, absl::Time deadline,
      wire::RollbackResponse* response) = 0;
  virtual std::unique_ptr<ShardCall> Checkpoint(
      const wire::CheckpointRequest& request, absl::Time deadline,
      wire::CheckpointResponse* response) = 0;
  virtual std::unique_ptr<ShardCall> LeaseData(
      const wire::LeaseDataRequest& request, absl::Time deadline,
      wire::LeaseDataResponse* response) = 0;

  // Whether the shard serves workers, once the call is awaited with OK:
  // *serving is false while a restarted shard agrees on its checkpoint with
  // the others (it answers Status but takes no training) and once it shuts
  // down. Over gRPC, the standard health-checking service that every
  // ps_server runs (it needs no token). `serving` is borrowed until the call
  // is awaited.
  virtual std::unique_ptr<ShardCall> Health(absl::Time deadline,
                                            bool* serving) = 0;

  // A new exchange for pushes and pulls; the channel must outlive it.
  virtual std::unique_ptr<ShardExchange> NewExchange() = 0;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_SHARD_CHANNEL_H_
