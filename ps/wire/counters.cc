#include "ps/wire/counters.h"

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {

void PushCountersToProto(const PushCounters& c, wire::PushCounters* out) {
  out->set_aggregated(c.aggregated);
  out->set_applied(c.applied);
  out->set_dropped_stale(c.dropped_stale);
  out->set_dropped_surplus(c.dropped_surplus);
  out->set_refused(c.refused);
  out->set_refused_too_stale(c.refused_too_stale);
  out->set_completed_by_leave(c.completed_by_leave);
}

PushCounters PushCountersFromProto(const wire::PushCounters& c) {
  PushCounters out;
  out.aggregated = c.aggregated();
  out.applied = c.applied();
  out.dropped_stale = c.dropped_stale();
  out.dropped_surplus = c.dropped_surplus();
  out.refused = c.refused();
  out.refused_too_stale = c.refused_too_stale();
  out.completed_by_leave = c.completed_by_leave();
  return out;
}

void StalenessToProto(
    const std::map<int64_t, int64_t>& histogram,
    google::protobuf::RepeatedPtrField<wire::StalenessBucket>* out) {
  for (const auto& [staleness, count] : histogram) {
    wire::StalenessBucket* b = out->Add();
    b->set_staleness(staleness);
    b->set_count(count);
  }
}

std::map<int64_t, int64_t> StalenessFromProto(
    const google::protobuf::RepeatedPtrField<wire::StalenessBucket>& buckets) {
  std::map<int64_t, int64_t> out;
  for (const wire::StalenessBucket& b : buckets) out[b.staleness()] = b.count();
  return out;
}

void RollbacksToProto(
    const std::vector<RollbackRecord>& rollbacks,
    google::protobuf::RepeatedPtrField<wire::RollbackInfo>* out) {
  for (const RollbackRecord& r : rollbacks) {
    wire::RollbackInfo* info = out->Add();
    info->set_generation(r.generation);
    info->set_label(r.label);
    info->set_from_step(r.from_step);
    info->set_to_step(r.to_step);
  }
}

std::vector<RollbackRecord> RollbacksFromProto(
    const google::protobuf::RepeatedPtrField<wire::RollbackInfo>& rollbacks) {
  std::vector<RollbackRecord> out;
  for (const wire::RollbackInfo& r : rollbacks) {
    out.push_back({r.generation(), r.label(), r.from_step(), r.to_step()});
  }
  return out;
}

void DataQueueCountersToProto(const DataQueueCounters& c,
                              wire::DataQueueCounters* out) {
  out->set_leased(c.leased);
  out->set_done(c.done);
  out->set_returned(c.returned);
  out->set_epochs_completed(c.epochs_completed);
}

DataQueueCounters DataQueueCountersFromProto(const wire::DataQueueCounters& c) {
  DataQueueCounters out;
  out.leased = c.leased();
  out.done = c.done();
  out.returned = c.returned();
  out.epochs_completed = c.epochs_completed();
  return out;
}

wire::TrainingMode ModeToProto(Mode mode) {
  return mode == Mode::kSync ? wire::SYNC : wire::ASYNC;
}

absl::StatusOr<Mode> ModeFromProto(int mode) {
  switch (mode) {
    case wire::SYNC:
      return Mode::kSync;
    case wire::ASYNC:
      return Mode::kAsync;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("training mode ", mode, " is not sync or async"));
  }
}

wire::OptimizerKind OptimizerKindToProto(OptimizerOptions::Kind kind) {
  switch (kind) {
    case OptimizerOptions::Kind::kAdam:
      return wire::ADAM;
    case OptimizerOptions::Kind::kSgd:
      return wire::SGD;
    case OptimizerOptions::Kind::kMomentum:
      return wire::MOMENTUM;
  }
  return wire::OPTIMIZER_KIND_UNSPECIFIED;
}

absl::StatusOr<OptimizerOptions::Kind> OptimizerKindFromProto(int kind) {
  switch (kind) {
    case wire::ADAM:
      return OptimizerOptions::Kind::kAdam;
    case wire::SGD:
      return OptimizerOptions::Kind::kSgd;
    case wire::MOMENTUM:
      return OptimizerOptions::Kind::kMomentum;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer ", kind, " is not adam, sgd or momentum"));
  }
}

}  // namespace ps
}  // namespace psgd
