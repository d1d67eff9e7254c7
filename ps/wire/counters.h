// What a shard counts, and the mode and optimizer enums
// (proto/counters.proto), converted once: the Status reply
// (ps/wire/wire.h) and the checkpoint files (ps/checkpoint/checkpoint.h)
// both use these.
//
// Thread-safety: pure functions.
#ifndef PSGD_PS_WIRE_COUNTERS_H_
#define PSGD_PS_WIRE_COUNTERS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "proto/counters.pb.h"
#include "ps/state/data_queue.h"
#include "ps/state/options.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

void PushCountersToProto(const PushCounters& c, wire::PushCounters* out);
PushCounters PushCountersFromProto(const wire::PushCounters& c);

// staleness -> count, ascending.
void StalenessToProto(
    const std::map<int64_t, int64_t>& histogram,
    google::protobuf::RepeatedPtrField<wire::StalenessBucket>* out);
std::map<int64_t, int64_t> StalenessFromProto(
    const google::protobuf::RepeatedPtrField<wire::StalenessBucket>& buckets);

void DataQueueCountersToProto(const DataQueueCounters& c,
                              wire::DataQueueCounters* out);
DataQueueCounters DataQueueCountersFromProto(const wire::DataQueueCounters& c);

wire::TrainingMode ModeToProto(Mode mode);
// INVALID_ARGUMENT for TRAINING_MODE_UNSPECIFIED and unknown values.
absl::StatusOr<Mode> ModeFromProto(int mode);
wire::OptimizerKind OptimizerKindToProto(OptimizerOptions::Kind kind);
// INVALID_ARGUMENT for OPTIMIZER_KIND_UNSPECIFIED and unknown values.
absl::StatusOr<OptimizerOptions::Kind> OptimizerKindFromProto(int kind);

void RollbacksToProto(
    const std::vector<RollbackRecord>& rollbacks,
    google::protobuf::RepeatedPtrField<wire::RollbackInfo>* out);
std::vector<RollbackRecord> RollbacksFromProto(
    const google::protobuf::RepeatedPtrField<wire::RollbackInfo>& rollbacks);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_COUNTERS_H_
