#include "ps/wire/wire.h"

#include "absl/strings/str_cat.h"
#include "ps/wire/counters.h"
#include "ps/wire/shared_memory.h"
#include "ps/wire/variables.h"

namespace psgd {
namespace ps {

absl::StatusOr<DType> DTypeFromProto(const wire::TensorData& t) {
  switch (t.dtype()) {
    case wire::DT_FLOAT32:
      return DType::kFloat32;
    case wire::DT_BFLOAT16:
      return DType::kBFloat16;
    case wire::DT_FLOAT16:
      return DType::kFloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", t.spec().name(), "' has dtype ",
          static_cast<int>(t.dtype()), ", which is unspecified or unknown"));
  }
}

wire::DataType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return wire::DT_FLOAT32;
    case DType::kBFloat16:
      return wire::DT_BFLOAT16;
    case DType::kFloat16:
      return wire::DT_FLOAT16;
  }
  return wire::DATA_TYPE_UNSPECIFIED;
}

absl::StatusOr<std::vector<TensorBytes>> TensorBytesFromProto(
    const google::protobuf::RepeatedPtrField<wire::TensorData>& tensors,
    absl::string_view shared) {
  std::vector<TensorBytes> out;
  out.reserve(tensors.size());
  for (const wire::TensorData& t : tensors) {
    absl::StatusOr<DType> dtype = DTypeFromProto(t);
    if (!dtype.ok()) return dtype.status();
    absl::string_view data = t.data();
    if (t.has_shared()) {
      const std::string what = absl::StrCat("tensor ", t.spec().name());
      if (!t.data().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": both data and shared bytes"));
      }
      if (shared.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what,
                         ": its bytes are in shared memory but the request "
                         "names no segment"));
      }
      absl::StatusOr<int64_t> offset = CheckSharedBytes(
          t.shared(), static_cast<int64_t>(shared.size()), what);
      if (!offset.ok()) return offset.status();
      data = shared.substr(static_cast<size_t>(*offset),
                           static_cast<size_t>(t.shared().size()));
    }
    const wire::VariableSpec& spec = t.spec();
    out.push_back(TensorBytes{
        spec.name(),
        absl::MakeConstSpan(spec.shape().data(), spec.shape().size()), *dtype,
        data, std::nullopt});
    if (t.has_scale()) out.back().scale = t.scale();
    out.back().no_gradient = t.no_gradient();
    out.back().kind = VariableKindFromProto(spec.kind());
    if (spec.has_slice_of()) {
      out.back().slice_variable = spec.slice_of().variable();
      out.back().slice_part = spec.slice_of().part();
      out.back().slice_row_begin = spec.slice_of().row_begin();
    }
  }
  return out;
}

std::vector<absl::string_view> SegmentRanges(
    absl::Span<const TensorBytes> tensors,
    google::protobuf::RepeatedPtrField<wire::TensorData>* out) {
  static const char kZeros[kSharedAlign > kSharedHeaderBytes
                               ? kSharedAlign
                               : kSharedHeaderBytes] = {};
  std::vector<absl::string_view> ranges;
  ranges.emplace_back(kZeros, kSharedHeaderBytes);
  SharedLayout layout;
  for (const TensorBytes& t : tensors) {
    if (t.no_gradient) {
      SharedTensorToProto(t, 0, out->Add());
      continue;
    }
    const int64_t size = static_cast<int64_t>(t.data.size());
    const int64_t offset = layout.Add(size);
    SharedTensorToProto(t, offset, out->Add());
    if (size > 0) ranges.push_back(t.data);
    const int64_t padding = layout.size() - offset - size;
    if (padding > 0) ranges.emplace_back(kZeros, static_cast<size_t>(padding));
  }
  return ranges;
}

void SharedTensorToProto(const TensorBytes& t, int64_t offset,
                         wire::TensorData* out) {
  TensorBytes meta = t;
  meta.data = {};
  TensorBytesToProto(meta, out);
  if (t.no_gradient) return;
  out->mutable_shared()->set_offset(offset);
  out->mutable_shared()->set_size(static_cast<int64_t>(t.data.size()));
}

void TensorBytesToProto(const TensorBytes& t, wire::TensorData* out) {
  wire::VariableSpec* spec = out->mutable_spec();
  spec->set_name(t.name.data(), t.name.size());
  spec->mutable_shape()->Assign(t.shape.begin(), t.shape.end());
  out->set_dtype(DTypeToProto(t.dtype));
  out->mutable_data()->assign(t.data.data(), t.data.size());
  if (t.scale.has_value()) {
    out->set_scale(*t.scale);
  } else {
    out->clear_scale();
  }
  out->set_no_gradient(t.no_gradient);
  if (t.kind.has_value()) {
    spec->set_kind(VariableKindToProto(*t.kind));
  } else {
    spec->clear_kind();
  }
  if (!t.slice_variable.empty()) {
    wire::SliceOf* slice = spec->mutable_slice_of();
    slice->set_variable(t.slice_variable.data(), t.slice_variable.size());
    slice->set_part(t.slice_part);
    slice->set_row_begin(t.slice_row_begin);
  } else {
    spec->clear_slice_of();
  }
}

void TensorBytesToProto(
    const std::vector<TensorBytes>& tensors,
    google::protobuf::RepeatedPtrField<wire::TensorData>* out) {
  // Clear() keeps the elements (and their buffers) for reuse by Add().
  out->Clear();
  for (const TensorBytes& t : tensors) TensorBytesToProto(t, out->Add());
}

void PushReplyToProto(const PushReply& reply, wire::PushResponse* out) {
  switch (reply.outcome) {
    case PushOutcome::kAggregated:
      out->set_outcome(wire::AGGREGATED);
      break;
    case PushOutcome::kApplied:
      out->set_outcome(wire::APPLIED);
      break;
    case PushOutcome::kDroppedStale:
      out->set_outcome(wire::DROPPED_STALE);
      break;
    case PushOutcome::kDroppedSurplus:
      out->set_outcome(wire::DROPPED_SURPLUS);
      break;
  }
  if (reply.staged) {
    out->set_outcome(wire::PUSH_OUTCOME_UNSPECIFIED);
    out->set_staged(true);
  }
  out->set_reason(reply.reason);
  out->set_step(reply.step);
  out->set_staleness(reply.staleness);
  out->set_replicas_to_aggregate(reply.replicas_to_aggregate);
}

absl::StatusOr<PushReply> PushReplyFromProto(
    const wire::PushResponse& response) {
  PushReply reply;
  reply.reason = response.reason();
  reply.step = response.step();
  if (response.staged()) {
    reply.staged = true;  // a part: no outcome yet
    return reply;
  }
  switch (response.outcome()) {
    case wire::AGGREGATED:
      reply.outcome = PushOutcome::kAggregated;
      break;
    case wire::APPLIED:
      reply.outcome = PushOutcome::kApplied;
      break;
    case wire::DROPPED_STALE:
      reply.outcome = PushOutcome::kDroppedStale;
      break;
    case wire::DROPPED_SURPLUS:
      reply.outcome = PushOutcome::kDroppedSurplus;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "push response has outcome ", static_cast<int>(response.outcome()),
          ", which is unspecified or unknown"));
  }
  reply.staleness = response.staleness();
  reply.replicas_to_aggregate = response.replicas_to_aggregate();
  return reply;
}

void ShardStatusToProto(const ShardStatus& s, wire::StatusResponse* out) {
  out->set_cluster(s.cluster);
  out->set_shard_index(s.shard_index);
  out->set_num_shards(s.num_shards);
  out->set_mode(ModeToProto(s.mode));
  out->set_initialized(s.initialized);
  out->set_step(s.step);
  PushCountersToProto(s.counters, out->mutable_counters());
  StalenessToProto(s.staleness_histogram, out->mutable_staleness());
  out->mutable_live_workers()->Assign(s.live_workers.begin(),
                                      s.live_workers.end());
  out->set_replicas_to_aggregate(s.replicas_to_aggregate);
  out->set_total_num_replicas(s.total_num_replicas);
  out->set_num_parameters(s.num_parameters);
  out->set_pending_gradients(s.pending_gradients);
  out->set_pulls_waiting(s.pulls_waiting);
  out->set_shutting_down(s.shutting_down);
  out->set_run_dir(s.run_dir);
  out->set_workers_expired(s.workers_expired);
  if (s.data_queue) {
    wire::DataQueueStatus* d = out->mutable_data();
    d->set_epoch(s.data_epoch);
    d->set_chunks_done(s.data_chunks_done);
    d->set_chunks_per_epoch(s.data_chunks_per_epoch);
    d->set_chunks_out(s.data_chunks_out);
    d->set_chunks_queued(s.data_chunks_queued);
    DataQueueCountersToProto(s.data_counters, d->mutable_counters());
  }
  for (const VariableSpec& spec : s.variables) {
    VariableSpecToProto(spec, out->add_variables());
  }
  for (const auto& [worker, reason] : s.failed_workers) {
    wire::WorkerFailure* f = out->add_failed_workers();
    f->set_worker_id(worker);
    f->set_reason(reason);
  }
  out->set_generation(s.generation);
  out->set_awaiting_rollback(s.awaiting_rollback);
  if (s.restored_label >= 0) out->set_restored_label(s.restored_label);
  out->set_checkpoints_written(s.checkpoints_written);
  out->set_checkpoint_failures(s.checkpoint_failures);
  if (s.last_checkpoint_label >= 0) {
    out->set_last_checkpoint_label(s.last_checkpoint_label);
  }
  out->set_last_checkpoint_error(s.last_checkpoint_error);
  if (s.last_complete_checkpoint_label >= 0) {
    out->set_last_complete_checkpoint_label(s.last_complete_checkpoint_label);
  }
  wire::ShardMemory* m = out->mutable_memory();
  m->set_weights(s.memory.weights);
  m->set_weight_versions(s.memory.weight_versions);
  m->set_optimizer_slots(s.memory.optimizer_slots);
  m->set_aggregate(s.memory.aggregate);
  m->set_staged_parts(s.memory.staged_parts);
  m->set_compensation(s.memory.compensation);
  m->set_pushes_in_flight(s.memory.pushes_in_flight);
  m->set_push_buffers(s.memory.push_buffers);
  RollbacksToProto(s.rollbacks, out->mutable_rollbacks());
}

ShardStatus ShardStatusFromProto(const wire::StatusResponse& r) {
  ShardStatus s;
  s.cluster = r.cluster();
  s.shard_index = r.shard_index();
  s.num_shards = r.num_shards();
  // A server that does not say (older than this build) reads as sync.
  s.mode = ModeFromProto(r.mode()).value_or(Mode::kSync);
  s.initialized = r.initialized();
  s.step = r.step();
  s.counters = PushCountersFromProto(r.counters());
  s.staleness_histogram = StalenessFromProto(r.staleness());
  s.live_workers.assign(r.live_workers().begin(), r.live_workers().end());
  s.replicas_to_aggregate = r.replicas_to_aggregate();
  s.total_num_replicas = r.total_num_replicas();
  s.num_parameters = r.num_parameters();
  s.pending_gradients = r.pending_gradients();
  s.pulls_waiting = r.pulls_waiting();
  s.shutting_down = r.shutting_down();
  s.run_dir = r.run_dir();
  s.workers_expired = r.workers_expired();
  if (r.has_data()) {
    const wire::DataQueueStatus& d = r.data();
    s.data_queue = true;
    s.data_epoch = d.epoch();
    s.data_chunks_done = d.chunks_done();
    s.data_chunks_per_epoch = d.chunks_per_epoch();
    s.data_chunks_out = d.chunks_out();
    s.data_chunks_queued = d.chunks_queued();
    s.data_counters = DataQueueCountersFromProto(d.counters());
  }
  for (const wire::VariableSpec& v : r.variables()) {
    // A server that did not say (older than this build) lists parameters.
    s.variables.push_back(VariableSpecFromProto(v).spec);
  }
  for (const wire::WorkerFailure& f : r.failed_workers()) {
    s.failed_workers.emplace_back(f.worker_id(), f.reason());
  }
  const wire::ShardMemory& m = r.memory();
  s.memory.weights = m.weights();
  s.memory.weight_versions = m.weight_versions();
  s.memory.optimizer_slots = m.optimizer_slots();
  s.memory.aggregate = m.aggregate();
  s.memory.staged_parts = m.staged_parts();
  s.memory.compensation = m.compensation();
  s.memory.pushes_in_flight = m.pushes_in_flight();
  s.memory.push_buffers = m.push_buffers();
  s.generation = r.generation();
  s.awaiting_rollback = r.awaiting_rollback();
  s.restored_label = r.has_restored_label() ? r.restored_label() : -1;
  s.checkpoints_written = r.checkpoints_written();
  s.checkpoint_failures = r.checkpoint_failures();
  s.last_checkpoint_label =
      r.has_last_checkpoint_label() ? r.last_checkpoint_label() : -1;
  s.last_checkpoint_error = r.last_checkpoint_error();
  s.last_complete_checkpoint_label = r.has_last_complete_checkpoint_label()
                                         ? r.last_complete_checkpoint_label()
                                         : -1;
  s.rollbacks = RollbacksFromProto(r.rollbacks());
  return s;
}

void DataChunkRefToProto(const DataChunkRef& ref, wire::DataChunkRef* out) {
  out->set_epoch(ref.epoch);
  out->set_index(ref.index);
  out->set_lease(ref.lease);
}

DataChunkRef DataChunkRefFromProto(const wire::DataChunkRef& ref) {
  return DataChunkRef{ref.epoch(), ref.index(), ref.lease()};
}

void DataChunkToProto(const DataChunk& chunk, wire::LeaseDataResponse* out) {
  out->set_epoch(chunk.epoch);
  out->set_index(chunk.index);
  out->set_lease(chunk.lease);
  out->set_queue_generation(chunk.generation);
  out->mutable_samples()->Add(chunk.samples.begin(), chunk.samples.end());
}

DataChunk DataChunkFromProto(const wire::LeaseDataResponse& response) {
  DataChunk chunk;
  chunk.epoch = response.epoch();
  chunk.index = response.index();
  chunk.lease = response.lease();
  chunk.generation = response.queue_generation();
  chunk.samples.assign(response.samples().begin(), response.samples().end());
  return chunk;
}

}  // namespace ps
}  // namespace psgd
