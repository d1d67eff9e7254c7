// Conversions between proto/ps.proto messages (namespace psgd::ps::wire) and
// the core's types, for the network adapters (ps/server/grpc_service.cc,
// ps/client/grpc_channel.cc, ucx_channel.cc, sharded_client.cc). Only adapter
// files include this header.
//
// Thread-safety: pure functions. TensorBytes made from a message borrow the
// message, which must outlive them.
#ifndef PSGD_PS_WIRE_WIRE_H_
#define PSGD_PS_WIRE_WIRE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "proto/ps.pb.h"
#include "ps/state/data_queue.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// INVALID_ARGUMENT naming the tensor for DATA_TYPE_UNSPECIFIED or a value
// this build does not know.
absl::StatusOr<DType> DTypeFromProto(const wire::TensorData& t);
wire::DataType DTypeToProto(DType dtype);

// Borrows `tensors`, and `shared` (the segment a request names,
// ps/wire/shared_memory.h; empty: none) for the tensors whose bytes lie in
// it (TensorData.shared). INVALID_ARGUMENT as DTypeFromProto, and naming the
// tensor for shared bytes outside the segment's tensor area, without a
// segment, or beside data.
absl::StatusOr<std::vector<TensorBytes>> TensorBytesFromProto(
    const google::protobuf::RepeatedPtrField<wire::TensorData>& tensors,
    absl::string_view shared = {});

// Copies `t` into `out`, reusing the capacity of out's data buffer.
void TensorBytesToProto(const TensorBytes& t, wire::TensorData* out);

// `t` as TensorData whose bytes lie in a shared memory segment at `offset`
// (TensorData.shared; ps/wire/shared_memory.h): every field but the data,
// which is left empty. A no-gradient marker gets no shared bytes.
void SharedTensorToProto(const TensorBytes& t, int64_t offset,
                         wire::TensorData* out);

// The UCX data plane's methods (ps/server/ucx_data_plane.h says what their
// messages hold).
inline constexpr uint32_t kUcxPush = 1;
inline constexpr uint32_t kUcxPull = 2;
inline constexpr uint32_t kUcxWithdraw = 3;
inline constexpr uint32_t kUcxCommit = 4;
inline constexpr uint32_t kUcxDecidePush = 5;

// The two calls that carry a push's gradients (proto/ps.proto): Push (a
// lone shard decides it; a shard of several stages it), and DecidePush
// (shard 0 of several decides the whole push at once, every other shard
// having staged it).
enum class PushMethod { kPush, kDecidePush };

// `tensors` laid out as in a shared memory segment (SharedLayout: a 64-byte
// head, then each tensor at an offset aligned to 64), for a transport that
// sends byte ranges (the UCX data plane, ps/server/ucx_data_plane.h): each
// tensor's TensorData naming its offset is appended to `out`
// (SharedTensorToProto), and the result is the ranges whose concatenation
// is the segment, the head and padding as zeros (static), the tensors' own
// bytes referenced.
std::vector<absl::string_view> SegmentRanges(
    absl::Span<const TensorBytes> tensors,
    google::protobuf::RepeatedPtrField<wire::TensorData>* out);

// Fills `out` with `tensors`, reusing the messages already in it.
void TensorBytesToProto(
    const std::vector<TensorBytes>& tensors,
    google::protobuf::RepeatedPtrField<wire::TensorData>* out);

void PushReplyToProto(const PushReply& reply, wire::PushResponse* out);
// INVALID_ARGUMENT for an outcome this build does not know.
absl::StatusOr<PushReply> PushReplyFromProto(
    const wire::PushResponse& response);

void ShardStatusToProto(const ShardStatus& status, wire::StatusResponse* out);

// A data chunk's name (a push's chunk, a lease's give-back) and a lease's
// answer (ParameterShard::LeaseData).
void DataChunkRefToProto(const DataChunkRef& ref, wire::DataChunkRef* out);
DataChunkRef DataChunkRefFromProto(const wire::DataChunkRef& ref);
// Shard 0's decisions (ParameterShard::ApplyDecisions; ps/wire/decisions.cc),
// each kind of the core's Decision as its own message of the oneof. A field a
// kind does not carry keeps the core's default on the way back. FromProto:
// INVALID_ARGUMENT naming the decision's seq for a decision whose kind is
// unset (or one this build does not know), and naming its seq and step for
// a dropped push's unspecified or unknown reason.
void DecisionToProto(const Decision& d, wire::Decision* out);
absl::StatusOr<Decision> DecisionFromProto(const wire::Decision& d);
void DataChunkToProto(const DataChunk& chunk, wire::LeaseDataResponse* out);
DataChunk DataChunkFromProto(const wire::LeaseDataResponse& response);
ShardStatus ShardStatusFromProto(const wire::StatusResponse& response);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_WIRE_H_
