// The two big messages, PushRequest and PullResponse, without needless
// copies of their tensors:
//
//   EncodeWithTensors builds a gRPC ByteBuffer whose tensor data slices point
//   at the tensors' own memory (kept alive by `keep_alive` until gRPC lets
//   go), so that the only copy on the way out is into the socket.
//   DecodePullResponse reads a PullResponse from a ByteBuffer and copies
//   each tensor's bytes once, straight to where the caller wants them.
//
// The bytes are exactly the protobuf encoding of proto/ps.proto (fields in
// number order), so a peer that uses the generated code understands them,
// and the decoder accepts any valid encoding (fields in any order).
// Adapter files only (ps/server/grpc_service.cc, ps/client/grpc_channel.cc).
//
// Thread-safety: pure functions.
#ifndef PSGD_PS_WIRE_WIRE_ZERO_COPY_H_
#define PSGD_PS_WIRE_WIRE_ZERO_COPY_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"
#include "ps/state/types.h"

namespace psgd {
class ThreadPool;
namespace ps {

// `header` (every field but the tensors) followed by `tensors` as the
// repeated TensorData field `tensor_field` of the same message. Tensors of
// at least kZeroCopyMinBytes are referenced, smaller ones copied.
// keep_alive owns the tensors' memory (or tells when gRPC has let go of it)
// and is held until the last referencing slice is released.
constexpr size_t kZeroCopyMinBytes = 4096;
grpc::ByteBuffer EncodeWithTensors(const google::protobuf::MessageLite& header,
                                   int tensor_field,
                                   absl::Span<const TensorBytes> tensors,
                                   std::shared_ptr<const void> keep_alive);

// Where a decoded tensor's bytes go: called with the tensor's name, shape
// and dtype (its data empty) and its byte count; returns a buffer of that
// many bytes, or an error that ends the decoding.
using TensorSink = std::function<absl::StatusOr<char*>(
    const TensorBytes& tensor, size_t bytes)>;

// Called once a tensor's every field is read, with all of them (the scale
// among them) and its data where the sink put it; an error ends the
// decoding.
using TensorDone = std::function<absl::Status(const TensorBytes& tensor)>;

// Decodes a PullResponse: its step into *step, its wait_micros into
// *wait_micros, its generation into *generation and its learning_rate into
// *learning_rate (each when not null) and each tensor through `sink` (and
// `done`, when set). DATA_LOSS for bytes that are no valid PullResponse;
// the sink's errors as they are.
//
// `shared`: the segment the pull named (ps/wire/shared_memory.h; empty:
// none); a tensor whose bytes lie in it (TensorData.shared) is copied from
// it to the sink's buffer (on `copy_pool`'s threads when given), DATA_LOSS
// when they are not within it. What the server said of the segment goes to
// *shared_reply when not null.
struct SharedPullReply {
  std::string refused;  // PullResponse.shared_memory_refused
  int64_t needed = 0;   // PullResponse.shared_memory_needed
};
absl::Status DecodePullResponse(grpc::ByteBuffer* buffer, int64_t* step,
                                int64_t* wait_micros, const TensorSink& sink,
                                int64_t* generation = nullptr,
                                const TensorDone& done = nullptr,
                                double* learning_rate = nullptr,
                                absl::string_view shared = {},
                                SharedPullReply* shared_reply = nullptr,
                                ThreadPool* copy_pool = nullptr);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_WIRE_ZERO_COPY_H_
