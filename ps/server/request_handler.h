// The request-level half of the gRPC adapter, without gRPC: each request of
// proto/ps.proto is checked (its cluster), converted (ps/wire/wire.h) and
// passed to the shard, and the shard's reply is written into the response. The
// gRPC service (ps/server/grpc_service.h) calls it from its handlers; the
// fuzzer (tests/fuzz/shard_fuzz.h) calls it with arbitrary requests, so that
// both run the same validation.
//
// Errors are the shard's (ps/shard/shard.h), plus INVALID_ARGUMENT for a tensor
// whose dtype is unspecified or unknown (ps/wire/wire.h).
//
// Thread-safety: thread-safe. The shard is not owned and must outlive the
// handler.
#ifndef PSGD_PS_SERVER_REQUEST_HANDLER_H_
#define PSGD_PS_SERVER_REQUEST_HANDLER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "proto/ps.pb.h"
#include "ps/shard/shard.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {

class ShardRequestHandler {
 public:
  // `wire`: the element types pushes carry and pulls are answered in (the
  // cluster config's `wire` block, ServerOptions::wire); the shard holds
  // float32 and knows nothing of them.
  explicit ShardRequestHandler(ParameterShard* shard, WireDTypes wire = {})
      : shard_(shard), wire_(wire) {}
  ShardRequestHandler(const ShardRequestHandler&) = delete;
  ShardRequestHandler& operator=(const ShardRequestHandler&) = delete;

  ParameterShard* shard() const { return shard_; }
  const WireDTypes& wire() const { return wire_; }

  // Also keeps the request's run_dir once it succeeds, when none is set and
  // it passes AcceptableRunDir under the run root (SetRunRoot); any other is
  // ignored, with a log line: no path of a request decides where the
  // server writes.
  absl::Status Initialize(const wire::InitializeRequest& request,
                          wire::InitializeResponse* response);
  // Checks the cluster and registers the pull with the shard
  // (ParameterShard::PullAsync): `done` runs once, with the weights or an
  // error, possibly before this returns. Returns the ticket for
  // ParameterShard::CancelPull, or 0 when `done` has run.
  uint64_t Pull(const wire::PullRequest& request,
                ParameterShard::PullDone done);
  // Checks the gradients against the cluster's wire dtype
  // (wire().gradients; ps/wire/wire_dtype.h) and converts 16-bit
  // ones to float32 before the shard sees them: INVALID_ARGUMENT naming the
  // tensor for another dtype, a wrong byte count or a bad float16 scale,
  // with the shard unchanged. Each gRPC thread keeps its conversion
  // buffers (thread_local) from call to call. `shared`: the bytes of the
  // segment the request names (PushRequest.shared_memory, attached by the
  // caller; empty: none), where gradients with TensorData.shared lie.
  // They are copied into a buffer of this thread's first (the worker can
  // write its region meanwhile) unless `shared_is_private`: bytes no one
  // else can change (a message the UCX data plane received). `keep`: holds
  // `request` (a gRPC push's parsed message): a shard of several then
  // stages float32 gradients in the request's own memory instead of
  // copying them (ParameterShard::Push); null: copies. `method`:
  // kDecidePush for the DecidePush call (ParameterShard::DecidePush: shard
  // 0 decides the whole push at once; INVALID_ARGUMENT for a part).
  absl::Status Push(const wire::PushRequest& request,
                    wire::PushResponse* response, absl::string_view shared = {},
                    bool shared_is_private = false,
                    std::shared_ptr<const void> keep = nullptr,
                    PushMethod method = PushMethod::kPush);
  // Shard 0 of a cluster of several shards: decides a push every shard has
  // staged (ParameterShard::Commit; FAILED_PRECONDITION naming the shard and
  // the step for a push not staged here complete, or on another shard).
  absl::Status Commit(const wire::CommitRequest& request,
                      wire::PushResponse* response);
  absl::Status Join(const wire::JoinRequest& request,
                    wire::MembershipResponse* response);
  absl::Status Leave(const wire::LeaveRequest& request,
                     wire::MembershipResponse* response);
  absl::Status Status(const wire::StatusRequest& request,
                      wire::StatusResponse* response);
  absl::Status Shutdown(const wire::ShutdownRequest& request,
                        wire::ShutdownResponse* response);
  // Rolls the shard back to its checkpoint `label` in a new generation
  // (ParameterShard::Rollback).
  absl::Status Rollback(const wire::RollbackRequest& request,
                        wire::RollbackResponse* response);
  // Asks the shard for a checkpoint (ParameterShard::RequestCheckpoint).
  absl::Status Checkpoint(const wire::CheckpointRequest& request,
                          wire::CheckpointResponse* response);
  // The next chunk of the data (ParameterShard::LeaseData).
  absl::Status LeaseData(const wire::LeaseDataRequest& request,
                         wire::LeaseDataResponse* response);
  // Shard 0's decisions for this shard (ParameterShard::ApplyDecisions),
  // all converted before any is applied: INVALID_ARGUMENT naming the shard,
  // its step and the decision's seq for one whose kind is unset or unknown
  // (ps/wire/wire.h), nothing applied.
  absl::Status ApplyDecisions(const wire::ApplyDecisionsRequest& request,
                              wire::ApplyDecisionsResponse* response);
  // The checkpoints complete in the shard's own directory
  // (ParameterShard::CompleteCheckpoints); answered while agreeing too.
  absl::Status ListCheckpoints(const wire::ListCheckpointsRequest& request,
                               wire::ListCheckpointsResponse* response);

  // The run directory: the first non-empty value given here or taken from
  // an Initialize request; reported by Status.
  void SetRunDirIfUnset(absl::string_view run_dir);
  std::string run_dir() const;
  // The server's run root (its config's run_root; empty: none, and no run
  // directory is ever taken from a request).
  void SetRunRoot(absl::string_view run_root);

 private:
  ParameterShard* const shard_;  // Not owned.
  const WireDTypes wire_;
  mutable Mutex run_dir_mu_;
  std::string run_dir_ ABSL_GUARDED_BY(run_dir_mu_);
  std::string run_root_ ABSL_GUARDED_BY(run_dir_mu_);
};

// OK when `requested`, a run directory an Initialize request names, is one
// the server may write to: exactly RUN_ROOT/CLUSTER-<letters, digits, '-',
// '_', '.'>, an existing directory (not a symbolic link) owned by this
// process's user. FAILED_PRECONDITION saying which rule it breaks
// otherwise (the chief makes the run directory under the same run root
// before it initialises the servers).
absl::Status AcceptableRunDir(absl::string_view requested,
                              absl::string_view run_root,
                              absl::string_view cluster);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_REQUEST_HANDLER_H_
