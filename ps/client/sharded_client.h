// The PsClient contract, written once over one ShardChannel per shard
// (ps/client/shard_channel.h): gRPC or UCX beside it (RemotePsClient,
// ps/client/remote_client.h) or the shards' request handlers in this process
// (InProcessPsClient, ps/testing/in_process_client.h). It slices the caller's
// whole variables over the placement and assembles pulled slices
// (ps/client/model_slices.h), picks the shards a part concerns, skips the
// shards with nothing to push, starts every shard's call before it waits for
// any, converts gradients to the wire dtype and pulled weights back, agrees on
// the shards' generation, and returns the first error with the shard's name in
// front
// ("push to shard 1 at host:port: ...").
//
// Errors: as PsClient (ps/client/ps_client.h): INVALID_ARGUMENT for tensors or
// a version that do not match the model (nothing sent), the shards' own codes
// (ps/shard/shard.h) through their request handlers, ABORTED for a pull
// answered from two generations, UNAVAILABLE / DEADLINE_EXCEEDED from the
// transport, INTERNAL when the transport still holds a push's gradients 30 s
// after the call.
//
// Thread-safety: thread-safe: any calls may run on several threads at once.
// Pushes and pulls take their buffers (the channels' exchanges, the wire
// dtype conversion's memory) from a pool, so that a worker that pushes and
// pulls one call after another reuses the same ones.
#ifndef PSGD_PS_CLIENT_SHARDED_CLIENT_H_
#define PSGD_PS_CLIENT_SHARDED_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "ps/client/ps_client.h"
#include "ps/client/shard_channel.h"
#include "ps/state/placement.h"
#include "ps/state/types.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {

struct ShardedClientOptions {
  // Sent with every request.
  std::string cluster = "psgd";
  // This client's worker; -1 for none (a chief that only initialises or
  // shuts down, an evaluator).
  int worker_id = -1;
  // Deadline of every call but Pull (which takes its own).
  absl::Duration rpc_timeout = absl::Seconds(60);
  // Sent with Initialize (proto/ps.proto).
  std::string run_dir;
  // Gradients are pushed as wire.gradients; pulled weights must come as
  // wire.weights (docs/PS.md, "Wire dtypes").
  WireDTypes wire;
};

class ShardedPsClient : public PsClient {
 public:
  // channels[i] reaches shard i of `placement`. INVALID_ARGUMENT when their
  // number differs from the placement's shards or one is null.
  static absl::StatusOr<std::unique_ptr<ShardedPsClient>> Create(
      Placement placement, std::vector<std::unique_ptr<ShardChannel>> channels,
      ShardedClientOptions options);
  ~ShardedPsClient() override;

  const Placement& placement() const override { return placement_; }
  absl::Status AwaitServing(absl::Time deadline) override;
  absl::Status Initialize(
      absl::Span<const NamedConstTensorView> variables) override;
  absl::Status Join() override;
  // A Join of a new incarnation (a new random number from now on).
  absl::Status Rejoin() override;
  // A Join to shard 0 alone.
  absl::Status RenewLease() override;
  absl::Status Leave() override;
  absl::Status LeaveFailed(absl::string_view reason) override;
  absl::StatusOr<ModelVersion> Pull(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  absl::StatusOr<PushResult> Push(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  absl::StatusOr<ModelVersion> PullPart(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  void InterruptPulls() override;
  void ResumePulls() override;
  absl::StatusOr<PushResult> PushPart(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  absl::StatusOr<PushResult> CommitPush(const ModelVersion& version) override;
  absl::StatusOr<std::vector<ShardStatus>> Status() override;
  absl::StatusOr<std::vector<VariableSpec>> Variables() override;
  absl::Status Shutdown(absl::string_view reason) override;
  absl::Status Rollback(int64_t label, int64_t generation) override;
  absl::StatusOr<DataChunk> LeaseData(int64_t generation,
                                      const DataChunkRef* give_back) override;
  absl::Status RequestCheckpoint(int64_t label, bool now) override;

 protected:
  // For the factories of a transport (RemotePsClient, InProcessPsClient);
  // the arguments as Create's, already checked.
  ShardedPsClient(Placement placement,
                  std::vector<std::unique_ptr<ShardChannel>> channels,
                  ShardedClientOptions options);
  // INVALID_ARGUMENT as Create, without a prefix.
  static absl::Status CheckChannels(
      const Placement& placement,
      const std::vector<std::unique_ptr<ShardChannel>>& channels);

  const ShardChannel& channel(int shard) const { return *channels_[shard]; }

 private:
  // One push or pull's buffers, per shard (see the .cc).
  struct Buffers;
  template <typename Request, typename Response>
  using Method = std::unique_ptr<ShardCall> (ShardChannel::*)(const Request&,
                                                              absl::Time,
                                                              Response*);

  // Sends requests[i] to shard i through `method`, all at once, with the
  // rpc timeout; the first error names the shard.
  template <typename Request, typename Response>
  absl::Status CallEach(absl::string_view what,
                        Method<Request, Response> method,
                        const std::vector<Request>& requests,
                        std::vector<Response>* responses);
  // The same request to every shard.
  template <typename Request, typename Response>
  absl::Status CallAll(absl::string_view what, Method<Request, Response> method,
                       const Request& request);

  // Pull / PullPart and Push / PushPart once `model` is ordered (a part's
  // other variables null).
  absl::StatusOr<ModelVersion> PullModel(const ModelVersion& min_version,
                                         absl::Time deadline,
                                         absl::Span<float* const> model,
                                         bool part);
  absl::StatusOr<PushResult> PushModel(const ModelVersion& version,
                                       absl::Span<const float* const> model,
                                       bool part);

  // A spare Buffers from the pool, or a new one; back to the pool.
  // The replies of a push's calls: each shard's that was `sent`, or with
  // `decided_by_shard0` shard 0's (DecidePush) for every shard.
  absl::StatusOr<PushResult> ReadPushReplies(const Buffers& buffers,
                                             const ModelVersion& version,
                                             const std::vector<bool>& sent,
                                             bool decided_by_shard0) const;
  std::unique_ptr<Buffers> TakeBuffers();
  void ReturnBuffers(std::unique_ptr<Buffers> buffers);

  // This worker's Join, as Join and RenewLease send it.
  wire::JoinRequest JoinRequest() const;

  // Constant after construction.
  const ShardedClientOptions options_;
  const Placement placement_;
  const std::vector<std::unique_ptr<ShardChannel>> channels_;
  // Sent with every Join (JoinRequest.incarnation): random, never 0; a new
  // one at each Rejoin.
  std::atomic<uint64_t> incarnation_;

  Mutex mu_;
  std::vector<std::unique_ptr<Buffers>> spare_ ABSL_GUARDED_BY(mu_);

  // The pulls under way (their buffers' exchanges), for InterruptPulls.
  Mutex interrupt_mu_;
  bool interrupted_ ABSL_GUARDED_BY(interrupt_mu_) = false;
  absl::flat_hash_set<Buffers*> pulling_ ABSL_GUARDED_BY(interrupt_mu_);
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_SHARDED_CLIENT_H_
