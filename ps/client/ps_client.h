// How a worker reaches the parameter servers: one interface, implemented once
// by ShardedPsClient (ps/client/sharded_client.h) over a channel per shard:
// the network (ps/client/remote_client.h: gRPC, or UCX beside it; S
// addresses, all shards in parallel) or the shards' request handlers in
// process (ps/testing/in_process_client.h, for tests). It takes and returns
// whole model variables by name; slicing them over the shards
// (ps/state/placement.h) and assembling them again is its job.
//
// A worker loop (sync):
//   client->Join();
//   ModelVersion v = *client->Pull(ModelVersion::AtLeast(S, 0), deadline, w);
//   for (;;) {
//     ... gradients g from weights w ...
//     client->Push(v, g);                      // each shard tagged with v
//     v = *client->Pull(v.Next(), deadline, w);  // each shard past v
//   }
//   client->Leave();
// Async is the same with Pull(ModelVersion::AtLeast(S, 0), ...): no waiting.
//
// Every call goes to every shard. With several shards, a push is staged by
// every shard and then decided once, by shard 0, for all of them (docs/PS.md,
// "One decision per push"): applied everywhere or nowhere. A call returns
// the first refusal (its message names the shard). Error codes are those of
// ParameterShard (ps/shard/shard.h), plus INVALID_ARGUMENT for tensors that do
// not match the model and UNAVAILABLE / DEADLINE_EXCEEDED from the transport.
// ABORTED means the cluster rolled back to a checkpoint (or is about to):
// the worker re-syncs (docs/RELIABILITY.md).
//
// Thread-safety: as each implementation says (ShardedPsClient, hence
// RemotePsClient and InProcessPsClient, is thread-safe).
#ifndef PSGD_PS_CLIENT_PS_CLIENT_H_
#define PSGD_PS_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "ps/state/data_queue.h"
#include "ps/state/placement.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// The version of the model a worker holds: each shard's step. Shards keep
// their own steps, which may differ slightly (one shard may complete a step
// a moment before another, and in async mode they drift freely); a worker
// tags its push to shard i with steps[i], the step it pulled from shard i.
struct ModelVersion {
  std::vector<int64_t> steps;
  // The cluster's generation the weights belong to (one more with every
  // rollback to a checkpoint); pushes and pulls carry it, and a shard in
  // another generation answers ABORTED. 0: any (a version no pull
  // returned).
  int64_t generation = 0;
  // For a version that Pull returned: how long the slowest shard held the
  // pull before its step was reached (the servers' measure of a sync
  // worker's wait for the others). Zero otherwise.
  absl::Duration server_wait = absl::ZeroDuration();
  // For a version that Pull returned: the learning rate of the update that
  // made shard 0's weights (PullResponse.learning_rate; every shard applies
  // the same schedule). 0: not known (step 0, a restore, shard 0 not
  // pulled).
  double learning_rate = 0.0;
  // In a version given to Push: the data chunk the gradients were computed
  // from (PsClient::LeaseData), which goes to shard 0 with them.
  std::optional<DataChunkRef> chunk = std::nullopt;
  // In a version given to Push or PushPart, with several shards (docs/PS.md,
  // "One decision per push"): the push's id, the same in all its parts
  // (NewPushId). 0 in a Push: the client gives it one.
  uint64_t push_id = 0;

  // Every shard at least `step`.
  static ModelVersion AtLeast(int num_shards, int64_t step) {
    return ModelVersion{std::vector<int64_t>(num_shards, step)};
  }
  // Each shard's step plus one: what a sync worker waits for after a push.
  ModelVersion Next() const {
    ModelVersion v = *this;
    for (int64_t& s : v.steps) ++s;
    v.server_wait = absl::ZeroDuration();
    return v;
  }
};

// In a version given to PsClient::Push: the shard gets no push.
constexpr int64_t kNoPush = -1;

// A fresh id for a push (ModelVersion::push_id): unique in this process,
// and unlikely to be another process's (it starts at a random number).
uint64_t NewPushId();

// A model variable by name, borrowed.
struct NamedTensorView {
  std::string name;
  TensorView view;
};
struct NamedConstTensorView {
  std::string name;
  ConstTensorView view;
};

// A gradient's data that says "no gradient in this step" (a frozen
// parameter, or one the step did not use): pushed as a marker with no bytes
// (TensorData.no_gradient), and the servers leave the variable and its
// optimizer slots alone. Give it with the variable's shape:
//   {name, ConstTensorView(ps::NoGradient(), shape)}
inline const float* NoGradient() {
  static const float kMarker = 0.0f;
  return &kMarker;
}

// What each shard said about a push, indexed by shard.
struct PushResult {
  std::vector<PushReply> shards;
};

class PsClient {
 public:
  virtual ~PsClient() = default;

  virtual const Placement& placement() const = 0;
  int num_shards() const { return placement().num_shards; }

  // Returns once every shard serves workers, asking each again with backoff
  // (50 ms, doubling to 1 s) while it cannot be reached or does not serve
  // yet (a server starting, or a restarted one agreeing on its checkpoint
  // with the others); logs once which it waits for. DEADLINE_EXCEEDED
  // naming the shards that did not by `deadline`, each with what it last
  // answered.
  virtual absl::Status AwaitServing(absl::Time deadline) = 0;

  // Sends every shard its slices of the initial values (every model
  // variable once, by name, with its shape). A no-op on shards that are
  // already initialised with the same variables.
  virtual absl::Status Initialize(
      absl::Span<const NamedConstTensorView> variables) = 0;

  // This client's worker joins / leaves every shard.
  virtual absl::Status Join() = 0;
  virtual absl::Status Leave() = 0;
  // Joins as a new incarnation of this worker (a worker whose push shard 0
  // refused because its lease ran out meanwhile): every shard drops what
  // the worker had staged and shard 0 takes its data chunks back, so that
  // nothing it sent before is applied late. Default: Join.
  virtual absl::Status Rejoin() { return Join(); }
  // A sign of life for a worker silent on purpose
  // (worker/session/lease_keeper.h), to the shards that expire leases
  // (with several shards, shard 0 alone: the others follow its decisions),
  // never waiting on another: a paused or cut-off follower must not cost
  // the worker its lease while it waits for that follower. Default: Join.
  virtual absl::Status RenewLease() { return Join(); }
  // Leaves because this worker cannot take part (its model is not the
  // cluster's, its data cannot be read, ...): every shard keeps `reason`
  // (ShardStatus::failed_workers), and the chief ends the job with it.
  virtual absl::Status LeaveFailed(absl::string_view reason) = 0;

  // Fills `out` (every model variable once, by name) with the weights of
  // each shard i at step >= min_version.steps[i], waiting until `deadline`
  // at most, from min_version.generation (0: any). Returns the shards' steps
  // and their generation; ABORTED when the shards answered from different
  // generations (a rollback under way).
  virtual absl::StatusOr<ModelVersion> Pull(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) = 0;

  // Pushes `gradients` (every model variable once) to every shard i, tagged
  // with version.steps[i]; a shard whose step is kNoPush gets nothing and
  // its reply is marked `skipped`.
  virtual absl::StatusOr<PushResult> Push(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) = 0;

  // Overlap (docs/PS.md, "Pushes in parts"): Push and Pull for a part of
  // the model. `gradients` / `out` hold some of the model's variables, each
  // once. Only the shards that hold slices of them are called: their steps
  // and replies are as Push's and Pull's; the other shards' replies are
  // `skipped`, and their steps in PullPart's version are kNoPush. A push
  // part is staged by each shard (reply `staged`) until the shard has every
  // one of its variables' gradients from this worker for that step; that
  // part's reply is the push's outcome. Both may be called from several
  // threads at once (e.g. one pull per group of variables while parts are
  // pushed), also in RemotePsClient.
  virtual absl::StatusOr<ModelVersion> PullPart(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) = 0;

  // From any thread (a Ctrl-C while another thread waits for its step):
  // the Pulls and PullParts under way end now with CANCELLED "interrupted",
  // and so do those that start, until ResumePulls. The other calls go on.
  virtual void InterruptPulls() = 0;
  virtual void ResumePulls() = 0;

  virtual absl::StatusOr<PushResult> PushPart(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) = 0;

  // With several shards, once every part of a push (PushPart, all with
  // version.push_id) has been staged by every shard it went to: shard 0
  // decides the push, and every shard's reply in the result is that one
  // decision (Push commits by itself). INVALID_ARGUMENT with one shard
  // (there the last part decides) or without a push_id.
  virtual absl::StatusOr<PushResult> CommitPush(
      const ModelVersion& version) = 0;

  // One status per shard.
  virtual absl::StatusOr<std::vector<ShardStatus>> Status() = 0;
  // The variables the servers hold (the chief's, or a restored
  // checkpoint's), each shard's slices put back together as whole variables
  // (names and shapes; VariablesOfSlices): what a worker checks its own
  // model against before it joins. Empty before the chief's Initialize.
  // Works while a restored server awaits its rollback.
  virtual absl::StatusOr<std::vector<VariableSpec>> Variables() = 0;

  // Training is over: every shard shuts down (and its server exits).
  virtual absl::Status Shutdown(absl::string_view reason) = 0;

  // Every shard rolls back to checkpoint step-<label> in `generation`
  // (ParameterShard::Rollback; shards already in it do nothing).
  virtual absl::Status Rollback(int64_t label, int64_t generation) = 0;

  // Every shard saves checkpoint step-<label>: now, or at its first step
  // >= label (ParameterShard::RequestCheckpoint).
  virtual absl::Status RequestCheckpoint(int64_t label, bool now) = 0;

  // The servers hand out the data (data { sharding: SERVERS }): the next
  // chunk of sample indices for this client's worker, from shard 0, bound
  // to the worker's next pushes in order; `give_back` (may be null) a
  // chunk of the worker's given back unused (ParameterShard::LeaseData).
  // `generation`: the worker's (0: any). OUT_OF_RANGE once the data ended.
  virtual absl::StatusOr<DataChunk> LeaseData(
      int64_t generation, const DataChunkRef* give_back) = 0;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CLIENT_PS_CLIENT_H_
