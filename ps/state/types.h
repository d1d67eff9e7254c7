// Plain value types that the parameter-server core (ps/shard/shard.h) takes and
// returns: gradients as borrowed bytes, push outcomes, counters and a status
// snapshot. The gRPC adapter (ps/wire/wire.h) converts them to and from
// proto/ps.proto.
//
// Thread-safety: plain values; TensorBytes borrows memory that the caller
// keeps alive for the duration of the call it is passed to.
#ifndef PSGD_PS_STATE_TYPES_H_
#define PSGD_PS_STATE_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model_variables.h"
#include "ps/state/data_queue.h"

namespace psgd {
namespace ps {

// Element type on the wire. Shards store float32; bfloat16 and float16
// travel only (ps/wire/wire_dtype.h converts them).
enum class DType { kFloat32, kBFloat16, kFloat16 };

// "float32", "bfloat16", "float16".
absl::string_view DTypeName(DType dtype);
// Bytes per element.
int64_t DTypeSize(DType dtype);

// A tensor as it arrives: a name, a shape, a dtype and its raw little-endian
// row-major bytes. Borrows everything.
struct TensorBytes {
  absl::string_view name;
  absl::Span<const int64_t> shape;
  DType dtype = DType::kFloat32;
  absl::string_view data;
  // kFloat16 on the wire: the elements are float16(x * scale)
  // (proto/ps.proto, TensorData.scale). Absent for the other dtypes.
  std::optional<float> scale;
  // In a push: this variable had no gradient in the step (a frozen or
  // unused parameter; proto/ps.proto, TensorData.no_gradient). Name and
  // shape only, `data` empty; the shard leaves the variable alone.
  bool no_gradient = false;
  // In a push: the server's transport copied `data` out of the worker's
  // shared memory into its own and checked the values in that pass
  // (ParameterShard::CheckPushedTensors), so the shard does not scan them
  // again. Set by the server only, never from the wire.
  bool checked = false;
  // In an Initialize (and a restore) only, and required there: what the
  // variable is (proto/variable.proto); nullopt when the sender did not say.
  std::optional<VariableKind> kind = std::nullopt;
  // In an Initialize: for a row slice of a larger variable, that variable's
  // name (empty for a whole variable), the slice's part and first row.
  absl::string_view slice_variable = {};
  int slice_part = 0;
  int64_t slice_row_begin = 0;
};

// Borrows a float tensor's memory as TensorBytes.
TensorBytes FloatTensorBytes(absl::string_view name,
                             absl::Span<const int64_t> shape,
                             const float* data);
// The same, declared a trained parameter (an Initialize's tensor).
TensorBytes ParameterBytes(absl::string_view name,
                           absl::Span<const int64_t> shape, const float* data);

enum class PushOutcome {
  kAggregated,      // sync: added to the current step's aggregate
  kApplied,         // sync: completed the step; async: applied on arrival
  kDroppedStale,    // sync: from a step older than the one just completed
  kDroppedSurplus,  // sync: from the step just completed, which was full
};

// "aggregated", "applied", "dropped_stale", "dropped_surplus".
absl::string_view PushOutcomeName(PushOutcome outcome);

// Why a shard refused a push. A refusal is a FAILED_PRECONDITION status that
// carries its reason as a payload (PushRefused), so that a caller tells
// refusals apart without reading messages: PushRefusalOf reads the reason
// back, also on the other side of gRPC (common/grpc_status.h carries the
// payload).
enum class PushRefusal {
  kNone,           // not a push refusal: OK, or any other error
  kNotLive,        // the worker is not in the live set: join again
  kAlreadyPushed,  // the worker already pushed for that step (a copy)
  kTooStale,       // async: staleness beyond max_push_staleness
  kFromFuture,     // the push's step is ahead of the shard's
  kNotStaged,      // commit: shard 0 holds no such staged push (a lease
                   // that ran out or a new incarnation dropped it): the
                   // gradient is refused; join again and pull
};

// "none", "not_live", "already_pushed", "too_stale", "from_future",
// "not_staged".
absl::string_view PushRefusalName(PushRefusal reason);
// FAILED_PRECONDITION with `message` and `reason` as its payload.
absl::Status PushRefused(PushRefusal reason, absl::string_view message);
// The reason a refusal carries; kNone for any other status.
PushRefusal PushRefusalOf(const absl::Status& status);

// Why a shard refused a data lease where the worker's next move depends on
// the reason (ParameterShard::LeaseData): carried as a payload of the
// status, whose code stays what it says (UNAVAILABLE: lease again later;
// FAILED_PRECONDITION, NOT_FOUND, PERMISSION_DENIED: a chunk given back),
// also across gRPC, as PushRefusal is.
enum class LeaseRefusal {
  kNone,      // not one of these: OK, or any other error
  kNotEnded,  // nothing is left to hand out, but chunks of the last epoch
              // are out with other workers: lease again after a pause
  kNotYours,  // the chunk given back is not this worker's lease any more
              // (back in the queue, or in a step's aggregate): drop it
  kNotLive,   // the worker is not in the live set (its lease ran out while
              // it was paused or cut off): join again, then lease
};

// "none", "not_ended", "not_yours", "not_live".
absl::string_view LeaseRefusalName(LeaseRefusal reason);
// `status` (not OK) with `reason` as its payload.
absl::Status LeaseRefused(LeaseRefusal reason, absl::Status status);
// The reason a lease refusal carries; kNone for any other status.
LeaseRefusal LeaseRefusalOf(const absl::Status& status);

// What a shard says about one accepted push (refusals are error statuses).
struct PushReply {
  PushOutcome outcome = PushOutcome::kAggregated;
  std::string reason;
  int64_t step = 0;       // the shard's step after the push
  int64_t staleness = 0;  // async: shard step at arrival minus push step
  // Sync: N of the step the push was for, as the shard held it when the
  // push came (adaptive backup workers change it from step to step).
  int replicas_to_aggregate = 0;
  // The push did not go to this shard (its step was kNoPush in the
  // version pushed, ps/client/ps_client.h); the other fields mean nothing.
  bool skipped = false;
  // A part of a push (ParameterShard::PushPart) that the shard staged: the
  // push is not complete yet, and outcome and staleness mean nothing.
  bool staged = false;
};

// One decision of shard 0, the coordinator of a cluster of several shards
// (docs/PS.md, "One decision per push"): every other shard applies the
// decisions in `seq` order to the gradients it staged, so that every shard
// takes the same pushes into the same steps in the same order.
struct DecidedChunk {
  int worker = 0;
  DataChunkRef chunk;
  std::vector<int64_t> samples;   // the chunk's sample ids, for the ledger
  int64_t ledger_generation = 0;  // the data queue's generation
};
struct Decision {
  enum class Kind {
    kSyncStep,   // step `step` is applied: the mean of `workers`' gradients
    kAsyncPush,  // async: workers[0]'s gradient of `step` is applied
    kLeft,       // workers[0] left the live set (a Leave or its lease)
    kDropped,    // workers[0]'s push: dropped (stale, surplus) or refused
  };
  int64_t seq = 0;  // 1, 2, ... within a generation
  Kind kind = Kind::kSyncStep;
  // kSyncStep: the step the update completes (the shard goes to step + 1);
  // kAsyncPush, kDropped: the step shard 0 had the push tagged with.
  int64_t step = 0;
  // kSyncStep: the gradients' workers in the order they were summed.
  std::vector<int> workers;
  // The pushes' ids (ParameterShard::Push's push_id), as `workers`.
  std::vector<uint64_t> push_ids;
  double lr_scale = 1.0;  // the learning rate's factor of the update
  int64_t staleness = 0;  // kAsyncPush
  // kDropped: what became of the push (shard 0's reply or refusal).
  enum class Dropped { kStale, kSurplus, kRefused, kRefusedTooStale };
  Dropped dropped = Dropped::kStale;
  std::vector<DecidedChunk> chunks;  // the data chunks the update trained on
  // kSyncStep with adaptive backup workers: N of the next step, as shard 0
  // chose it (the others follow it); 0: N is not shard 0's to choose.
  int replicas_next = 0;
};

// What a decision's update reads, found before anything changes: the
// gradients of its pushes in the decision's order, or, for a sync step on
// the shard that decided it, the sum of them made as they came.
struct DecisionInputs {
  std::vector<std::vector<const float*>> pushes;
  bool summed = false;  // the sync step's gradients are in the aggregate
  // The step the first push was computed from, as this shard knows it (the
  // tag of its staged copy): async delay compensation.
  int64_t step = 0;
  // The arrivals of pushes staged here (the worker's pushes staged up to
  // each go with it); empty for gradients in hand.
  std::vector<uint64_t> arrivals;
};
absl::string_view DecisionKindName(Decision::Kind kind);

struct PushCounters {
  int64_t aggregated = 0;
  int64_t applied = 0;
  int64_t dropped_stale = 0;
  int64_t dropped_surplus = 0;
  int64_t refused = 0;             // every refused push, too stale included
  int64_t refused_too_stale = 0;   // async: beyond max_push_staleness
  int64_t completed_by_leave = 0;  // sync: steps a Leave completed
  // A cluster of several shards: complete pushes staged for shard 0's
  // decision, and decisions of shard 0 applied (the other shards).
  int64_t staged = 0;
  int64_t decisions_applied = 0;
};

// A rollback of the cluster to a checkpoint, as one shard saw it
// (docs/RELIABILITY.md).
struct RollbackRecord {
  int64_t generation = 0;  // the generation it started
  int64_t label = 0;       // the checkpoint it went back to (step-<label>)
  int64_t from_step = 0;   // this shard's step before
  int64_t to_step = 0;     // and after
  bool operator==(const RollbackRecord& o) const {
    return generation == o.generation && label == o.label &&
           from_step == o.from_step && to_step == o.to_step;
  }
};

// A consistent picture of one shard, for the Status RPC.
// What a shard holds in memory, item by item, in bytes: its share of the
// model and what the rules keep beside it (docs/PS.md, "Memory").
struct ShardMemory {
  int64_t weights = 0;  // the current version
  // Other versions of the weights: held by pulls in flight (each answered
  // with the version of its step) and delay compensation, or spare (kept
  // for the next updates instead of allocated).
  int64_t weight_versions = 0;
  int64_t optimizer_slots = 0;  // Adam's m and v, momentum
  int64_t aggregate = 0;        // sync: the sum of the step's gradients
  int64_t staged_parts = 0;     // pushes in parts not complete yet
  int64_t compensation = 0;     // DC-ASGD's compensated gradients
  // The serving layer's: push requests being decided now, and finished
  // ones' messages kept for reuse (the next pushes parse into them instead
  // of allocating).
  int64_t pushes_in_flight = 0;
  int64_t push_buffers = 0;

  int64_t Total() const {
    return weights + weight_versions + optimizer_slots + aggregate +
           staged_parts + compensation + pushes_in_flight + push_buffers;
  }
};

// The training mode (proto/cluster.proto's TrainingConfig.Mode).
enum class Mode { kSync, kAsync };

struct ShardStatus {
  std::string cluster;
  int shard_index = 0;
  int num_shards = 1;
  Mode mode = Mode::kSync;
  bool initialized = false;
  int64_t step = 0;
  PushCounters counters;
  // Async: staleness -> number of applied pushes with it.
  std::map<int64_t, int64_t> staleness_histogram;
  // Async staleness controls, since the server started (not saved in
  // checkpoints): pulls the staleness bound held back and their time held
  // back; pushes delay-compensated (DC-ASGD) and pushes applied without
  // compensation (no snapshot of their step recorded for the worker).
  int64_t ssp_blocked_pulls = 0;
  double ssp_blocked_seconds = 0;
  int64_t dc_compensated = 0;
  int64_t dc_uncompensated = 0;
  std::vector<int> live_workers;  // ascending
  int replicas_to_aggregate = 1;
  int total_num_replicas = 1;
  int64_t num_parameters = 0;
  int pending_gradients = 0;  // sync: gathered for the current step
  int pulls_waiting = 0;      // held until their step comes
  // Sync: when the current step began (the last one completed, the
  // initialisation, a restore or a rollback), and the live workers that have
  // not pushed for it yet, ascending.
  absl::Time step_started = absl::InfinitePast();
  std::vector<int> waiting_for;
  bool shutting_down = false;
  // Workers taken out of the live set by ExpireWorkers (lease ran out).
  int64_t workers_expired = 0;
  // The data queue (shard 0 when the servers hand out the data;
  // ps/state/data_queue.h): whether it has one, where it is, and the chunks
  // leased, done and back in the queue so far (restored with checkpoints).
  bool data_queue = false;
  int64_t data_epoch = 0;
  int64_t data_chunks_done = 0;  // of the current epoch
  int64_t data_chunks_per_epoch = 0;
  int64_t data_chunks_out = 0;
  int64_t data_chunks_queued = 0;
  DataQueueCounters data_counters;
  // Workers that left with a failure (they cannot take part), by worker id
  // ascending, with the reason each gave last.
  std::vector<std::pair<int, std::string>> failed_workers;
  // The shard's variables (name, shape, kind, the variable a slice is part
  // of) in its order, when asked for (StatusRequest.variables); none before
  // Initialize. Their initializers are unset.
  std::vector<VariableSpec> variables;
  // The run directory the server writes to; filled by the gRPC service
  // (the shard itself has none).
  std::string run_dir;

  // Checkpoints and rollbacks (docs/RELIABILITY.md). The cluster's
  // generation: 1 at the start, one more with each rollback.
  int64_t generation = 1;
  // Restored checkpoint step-<restored_label> at start and refuses pushes
  // and pulls (ABORTED) until a Rollback gives it a generation.
  bool awaiting_rollback = false;
  int64_t restored_label = -1;  // -1: started empty
  int64_t checkpoints_written = 0;
  int64_t checkpoint_failures = 0;
  int64_t last_checkpoint_label = -1;
  // The newest checkpoint complete for every shard, as this shard last saw
  // it (-1: none yet).
  int64_t last_complete_checkpoint_label = -1;
  std::string last_checkpoint_error;
  std::vector<RollbackRecord> rollbacks;  // oldest first

  ShardMemory memory;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_TYPES_H_
