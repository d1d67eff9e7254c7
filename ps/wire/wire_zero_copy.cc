#include "ps/wire/wire_zero_copy.h"

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/thread_pool.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "proto/ps.pb.h"
#include "ps/wire/shared_memory.h"
#include "ps/wire/wire.h"

namespace psgd {
namespace ps {
namespace {

using google::protobuf::io::CodedInputStream;

constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
// TensorData's fields (proto/ps.proto).
constexpr int kDTypeField = 3, kDataField = 4, kScaleField = 5,
              kSharedField = 9, kSpecField = 10;
constexpr uint32_t kFixed32 = 5;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void AppendTag(int field, uint32_t wire_type, std::string* out) {
  AppendVarint((static_cast<uint32_t>(field) << 3) | wire_type, out);
}

// The slice's user data: a heap copy of the owner, freed with the slice.
void ReleaseOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

// Reads a length prefix; -1 when it is missing or too large.
int ReadLength(CodedInputStream* input) {
  uint32_t n;
  if (!input->ReadVarint32(&n) || n > INT32_MAX) return -1;
  return static_cast<int>(n);
}

absl::Status Malformed(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("malformed PullResponse on the wire: ", what));
}

// The tensor `meta` describes, without data.
TensorBytes MetaOf(const wire::TensorData& meta, DType dtype) {
  TensorBytes t{meta.spec().name(),
                absl::MakeConstSpan(meta.spec().shape().data(),
                                    meta.spec().shape().size()),
                dtype,
                {},
                std::nullopt};
  if (meta.has_scale()) t.scale = meta.scale();
  return t;
}

// The buffer `sink` gives for the tensor `meta` describes, `size` bytes.
absl::StatusOr<char*> SinkFor(const wire::TensorData& meta, size_t size,
                              const TensorSink& sink) {
  absl::StatusOr<DType> dtype = DTypeFromProto(meta);
  if (!dtype.ok()) return dtype.status();
  return sink(MetaOf(meta, *dtype), size);
}

// What DecodeTensor has read of one TensorData so far.
struct TensorRead {
  wire::TensorData meta;      // everything but the data
  std::string early_data;     // data that came before the name or the dtype
  bool data_seen = false;     // a data field came
  bool data_done = false;     // ... and went straight into the sink's buffer
  char* dest_data = nullptr;  // the sink's buffer, once given
  size_t dest_size = 0;
};

// Reads the fields of one TensorData up to its length limit into `r`; the
// data goes straight into `sink`'s buffer when the name and dtype came
// before it, else aside into r.early_data.
absl::Status ReadTensorFields(CodedInputStream* input, const TensorSink& sink,
                              TensorRead& r) {
  wire::TensorData& meta = r.meta;
  while (uint32_t tag = input->ReadTag()) {
    const int field = static_cast<int>(tag >> 3);
    const uint32_t type = tag & 7;
    if (field == kSpecField && type == kLengthDelimited) {
      // The variable's name and shape: a few bytes, parsed as a message.
      const int length = ReadLength(input);
      if (length < 0) return Malformed("tensor spec");
      const CodedInputStream::Limit limit = input->PushLimit(length);
      if (!meta.mutable_spec()->MergePartialFromCodedStream(input) ||
          !input->ConsumedEntireMessage()) {
        return Malformed("tensor spec");
      }
      input->PopLimit(limit);
    } else if (field == kDTypeField && type == kVarint) {
      uint32_t dtype;
      if (!input->ReadVarint32(&dtype)) return Malformed("tensor dtype");
      meta.set_dtype(static_cast<wire::DataType>(dtype));
    } else if (field == kScaleField && type == kFixed32) {
      uint32_t bits;
      if (!input->ReadLittleEndian32(&bits)) return Malformed("tensor scale");
      float scale;
      std::memcpy(&scale, &bits, sizeof(scale));
      meta.set_scale(scale);
    } else if (field == kDataField && type == kLengthDelimited) {
      const int length = ReadLength(input);
      if (length < 0) return Malformed("data length");
      r.data_seen = true;
      if (meta.spec().name().empty() ||
          meta.dtype() == wire::DATA_TYPE_UNSPECIFIED) {
        // Data before the fields that say where it goes: keep it aside.
        if (!input->ReadString(&r.early_data, length)) {
          return Malformed("tensor data");
        }
        continue;
      }
      absl::StatusOr<char*> dest = SinkFor(meta, length, sink);
      if (!dest.ok()) return dest.status();
      if (!input->ReadRaw(*dest, length)) {
        return Malformed("tensor data");
      }
      r.dest_data = *dest;
      r.dest_size = length;
      r.data_done = true;
    } else if (field == kSharedField && type == kLengthDelimited) {
      std::string bytes;
      if (!input->ReadString(&bytes, ReadLength(input)) ||
          !meta.mutable_shared()->ParseFromString(bytes)) {
        return Malformed("tensor shared bytes");
      }
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(input,
                                                                      tag)) {
      return Malformed("tensor field");
    }
  }
  return absl::OkStatus();
}

// Gives the tensor of `r` its bytes when they did not go straight into the
// sink's buffer: from the shared memory segment the pull named (`shared`),
// from r.early_data, or none (proto3 leaves out empty bytes).
absl::Status PlaceTensorBytes(TensorRead& r, const TensorSink& sink,
                              absl::string_view shared, ThreadPool* pool) {
  const wire::TensorData& meta = r.meta;
  if (meta.has_shared()) {
    // The bytes lie in the segment the pull named (ps/wire/shared_memory.h).
    if (r.data_seen) {
      return Malformed("tensor with both data and shared bytes");
    }
    if (shared.empty()) {
      return Malformed("tensor in shared memory, but the pull named none");
    }
    absl::StatusOr<int64_t> offset =
        CheckSharedBytes(meta.shared(), static_cast<int64_t>(shared.size()),
                         absl::StrCat("tensor ", meta.spec().name()));
    if (!offset.ok()) return Malformed(offset.status().message());
    const size_t size = static_cast<size_t>(meta.shared().size());
    absl::StatusOr<char*> dest = SinkFor(meta, size, sink);
    if (!dest.ok()) return dest.status();
    ParallelCopy(pool, *dest, shared.data() + *offset, size);
    r.dest_data = *dest;
    r.dest_size = size;
  } else if (r.data_seen && !r.data_done) {
    absl::StatusOr<char*> dest = SinkFor(meta, r.early_data.size(), sink);
    if (!dest.ok()) return dest.status();
    std::memcpy(*dest, r.early_data.data(), r.early_data.size());
    r.dest_data = *dest;
    r.dest_size = r.early_data.size();
  } else if (!r.data_seen) {
    // proto3 leaves out empty bytes: a tensor with no elements.
    absl::StatusOr<char*> dest = SinkFor(meta, 0, sink);
    if (!dest.ok()) return dest.status();
    r.dest_data = *dest;
  }
  return absl::OkStatus();
}

// One TensorData within its length limit; `input` stands at its first field.
absl::Status DecodeTensor(CodedInputStream* input, const TensorSink& sink,
                          const TensorDone& done, absl::string_view shared,
                          ThreadPool* pool) {
  TensorRead r;
  if (absl::Status s = ReadTensorFields(input, sink, r); !s.ok()) return s;
  if (absl::Status s = PlaceTensorBytes(r, sink, shared, pool); !s.ok()) {
    return s;
  }
  if (done == nullptr) return absl::OkStatus();
  absl::StatusOr<DType> dtype = DTypeFromProto(r.meta);
  if (!dtype.ok()) return dtype.status();
  TensorBytes tensor = MetaOf(r.meta, *dtype);
  tensor.data = absl::string_view(r.dest_data, r.dest_size);
  return done(tensor);
}

}  // namespace

grpc::ByteBuffer EncodeWithTensors(const google::protobuf::MessageLite& header,
                                   int tensor_field,
                                   absl::Span<const TensorBytes> tensors,
                                   std::shared_ptr<const void> keep_alive) {
  std::vector<grpc::Slice> slices;
  std::string pending = header.SerializeAsString();
  auto flush = [&]() {
    if (!pending.empty()) slices.emplace_back(pending);
    pending.clear();
  };
  for (const TensorBytes& t : tensors) {
    wire::TensorData meta;
    meta.mutable_spec()->set_name(t.name.data(), t.name.size());
    meta.mutable_spec()->mutable_shape()->Assign(t.shape.begin(),
                                                 t.shape.end());
    meta.set_dtype(DTypeToProto(t.dtype));
    if (t.scale.has_value()) meta.set_scale(*t.scale);
    if (t.no_gradient) meta.set_no_gradient(true);
    const std::string meta_bytes = meta.SerializeAsString();
    const size_t n = t.data.size();
    const size_t length = meta_bytes.size() + 1 + VarintSize(n) + n;
    AppendTag(tensor_field, kLengthDelimited, &pending);
    AppendVarint(length, &pending);
    pending += meta_bytes;
    AppendTag(kDataField, kLengthDelimited, &pending);
    AppendVarint(n, &pending);
    if (n < kZeroCopyMinBytes) {
      pending.append(t.data.data(), n);
      continue;
    }
    flush();
    slices.emplace_back(const_cast<char*>(t.data.data()), n, &ReleaseOwner,
                        new std::shared_ptr<const void>(keep_alive));
  }
  flush();
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status DecodePullResponse(grpc::ByteBuffer* buffer, int64_t* step,
                                int64_t* wait_micros, const TensorSink& sink,
                                int64_t* generation, const TensorDone& done,
                                double* learning_rate, absl::string_view shared,
                                SharedPullReply* shared_reply,
                                ThreadPool* copy_pool) {
  grpc::ProtoBufferReader reader(buffer);
  CodedInputStream input(&reader);
  input.SetTotalBytesLimit(INT32_MAX);
  *step = 0;
  *wait_micros = 0;
  int64_t generation_value = 0;
  double learning_rate_value = 0.0;
  std::string refused;
  int64_t needed = 0;
  while (uint32_t tag = input.ReadTag()) {
    const int field = static_cast<int>(tag >> 3);
    const uint32_t type = tag & 7;
    if (field == 1 && type == kVarint) {  // step
      uint64_t v;
      if (!input.ReadVarint64(&v)) return Malformed("step");
      *step = static_cast<int64_t>(v);
    } else if (field == 3 && type == kVarint) {  // wait_micros
      uint64_t v;
      if (!input.ReadVarint64(&v)) return Malformed("wait_micros");
      *wait_micros = static_cast<int64_t>(v);
    } else if (field == 4 && type == kVarint) {  // generation
      uint64_t v;
      if (!input.ReadVarint64(&v)) return Malformed("generation");
      generation_value = static_cast<int64_t>(v);
    } else if (field == 5 && type == kFixed64) {  // learning_rate
      uint64_t v;
      if (!input.ReadLittleEndian64(&v)) return Malformed("learning_rate");
      std::memcpy(&learning_rate_value, &v, sizeof(v));
    } else if (field == 6 && type == kLengthDelimited) {  // ..._refused
      if (!input.ReadString(&refused, ReadLength(&input))) {
        return Malformed("shared_memory_refused");
      }
    } else if (field == 7 && type == kVarint) {  // shared_memory_needed
      uint64_t v;
      if (!input.ReadVarint64(&v)) return Malformed("shared_memory_needed");
      needed = static_cast<int64_t>(v);
    } else if (field == 2 && type == kLengthDelimited) {  // variables
      const int length = ReadLength(&input);
      if (length < 0) return Malformed("tensor length");
      const CodedInputStream::Limit limit = input.PushLimit(length);
      if (absl::Status s = DecodeTensor(&input, sink, done, shared, copy_pool);
          !s.ok()) {
        return s;
      }
      if (!input.ConsumedEntireMessage() || input.BytesUntilLimit() != 0) {
        return Malformed("tensor");
      }
      input.PopLimit(limit);
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&input,
                                                                      tag)) {
      return Malformed("field");
    }
  }
  if (!input.ConsumedEntireMessage()) return Malformed("trailing bytes");
  if (generation != nullptr) *generation = generation_value;
  if (learning_rate != nullptr) *learning_rate = learning_rate_value;
  if (shared_reply != nullptr) {
    shared_reply->refused = std::move(refused);
    shared_reply->needed = needed;
  }
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace psgd
