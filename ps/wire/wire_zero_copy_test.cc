#include "ps/wire/wire_zero_copy.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "proto/ps.pb.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {
namespace {

const std::vector<int64_t> kBigShape = {1024, 3};  // 12 KiB: referenced
const std::vector<int64_t> kSmallShape = {5};      // 20 bytes: copied

std::string Flatten(grpc::ByteBuffer buffer) {
  grpc::Slice slice;
  REQUIRE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()),
                     slice.size());
}

// Decodes into a map name -> values.
absl::Status Decode(grpc::ByteBuffer buffer, int64_t* step,
                    std::map<std::string, std::vector<float>>* out,
                    int64_t* wait_micros = nullptr) {
  int64_t wait = -1;
  return DecodePullResponse(
      &buffer, step, wait_micros != nullptr ? wait_micros : &wait,
      [&](const TensorBytes& t, size_t bytes) {
        std::vector<float>& v = (*out)[std::string(t.name)];
        v.resize(bytes / sizeof(float));
        return reinterpret_cast<char*>(v.data());
      });
}

grpc::ByteBuffer Serialized(const wire::PullResponse& m) {
  grpc::ByteBuffer buffer;
  bool own;
  REQUIRE(
      grpc::SerializationTraits<wire::PullResponse>::Serialize(m, &buffer, &own)
          .ok());
  return buffer;
}

TEST_CASE("encoded tensors are the protobuf encoding of the message") {
  std::vector<float> big(3072), small = {1, 2, 3, 4, 5};
  for (size_t i = 0; i < big.size(); ++i) big[i] = 0.5f * i;
  wire::PullResponse header;
  header.set_step(42);
  std::vector<TensorBytes> tensors = {
      FloatTensorBytes("big", kBigShape, big.data()),
      FloatTensorBytes("small", kSmallShape, small.data())};
  grpc::ByteBuffer encoded = EncodeWithTensors(
      header, wire::PullResponse::kVariablesFieldNumber, tensors, nullptr);

  // What the generated code writes, but each tensor's spec before its data
  // (so that the reader knows where the data goes before it comes).
  wire::PullResponse expected = header;
  for (const TensorBytes& t : tensors) {
    wire::TensorData* d = expected.add_variables();
    d->mutable_spec()->set_name(std::string(t.name));
    d->mutable_spec()->mutable_shape()->Assign(t.shape.begin(), t.shape.end());
    d->set_dtype(wire::DT_FLOAT32);
    d->set_data(t.data.data(), t.data.size());
  }
  const std::string flat = Flatten(encoded);
  wire::PullResponse parsed;
  REQUIRE(parsed.ParseFromString(flat));
  CHECK(parsed.SerializeAsString() == expected.SerializeAsString());
  CHECK(flat.find("big") <
        flat.find(std::string(reinterpret_cast<const char*>(big.data()), 16)));

  int64_t step = 0, wait_micros = -1;
  std::map<std::string, std::vector<float>> got;
  REQUIRE(Decode(encoded, &step, &got, &wait_micros).ok());
  CHECK(step == 42);
  CHECK(wait_micros == 0);
  CHECK(got["big"] == big);
  CHECK(got["small"] == small);
}

TEST_CASE("the pull's wait time, generation and rate travel in the header") {
  std::vector<float> small = {1, 2, 3, 4, 5};
  wire::PullResponse header;
  header.set_step(7);
  header.set_wait_micros(123456);
  header.set_generation(4);
  header.set_learning_rate(0.0375);
  std::vector<TensorBytes> tensors = {
      FloatTensorBytes("small", kSmallShape, small.data())};
  grpc::ByteBuffer encoded = EncodeWithTensors(
      header, wire::PullResponse::kVariablesFieldNumber, tensors, nullptr);
  int64_t step = 0, wait_micros = 0;
  std::map<std::string, std::vector<float>> got;
  REQUIRE(Decode(encoded, &step, &got, &wait_micros).ok());
  CHECK(step == 7);
  CHECK(wait_micros == 123456);
  CHECK(got["small"] == small);
  int64_t generation = 0;
  double learning_rate = 0;
  REQUIRE(DecodePullResponse(
              &encoded, &step, &wait_micros,
              [](const TensorBytes&, size_t) -> absl::StatusOr<char*> {
                static float sink[5];
                return reinterpret_cast<char*>(sink);
              },
              &generation, nullptr, &learning_rate)
              .ok());
  CHECK(generation == 4);
  CHECK(learning_rate == 0.0375);
}

TEST_CASE("referenced memory is kept alive until gRPC lets go of it") {
  std::vector<float> big(3072, 1.0f);
  bool released = false;
  {
    std::shared_ptr<const void> owner(nullptr,
                                      [&](const void*) { released = true; });
    wire::PushRequest header;
    grpc::ByteBuffer encoded = EncodeWithTensors(
        header, wire::PushRequest::kGradientsFieldNumber,
        {FloatTensorBytes("g", kBigShape, big.data())}, owner);
    owner.reset();
    CHECK(!released);  // the slice still refers to it
  }
  CHECK(released);
  // Small tensors are copied: nothing is held.
  bool small_released = false;
  {
    std::vector<float> small(5, 2.0f);
    std::shared_ptr<const void> owner(
        nullptr, [&](const void*) { small_released = true; });
    grpc::ByteBuffer encoded = EncodeWithTensors(
        wire::PushRequest(), wire::PushRequest::kGradientsFieldNumber,
        {FloatTensorBytes("s", kSmallShape, small.data())}, owner);
    owner.reset();
    CHECK(small_released);
  }
}

TEST_CASE("the decoder takes fields in any order, and unknown ones") {
  // The data of the tensor before its name (valid protobuf), an unknown
  // field, the step last.
  std::string bytes;
  wire::TensorData data_only;
  std::vector<float> values = {7, 8, 9, 10, 11};
  data_only.set_data(values.data(), values.size() * sizeof(float));
  wire::TensorData rest;
  rest.mutable_spec()->set_name("late");
  rest.mutable_spec()->add_shape(5);
  rest.set_dtype(wire::DT_FLOAT32);
  const std::string tensor =
      data_only.SerializeAsString() + rest.SerializeAsString() +
      std::string("\x98\x06\x01", 3);  // field 99, varint 1
  bytes.push_back(0x12);               // field 2, length-delimited
  bytes.push_back(static_cast<char>(tensor.size()));
  bytes += tensor;
  bytes += std::string("\x08\x07", 2);  // step = 7
  grpc::Slice slice(bytes);
  int64_t step = 0;
  std::map<std::string, std::vector<float>> got;
  REQUIRE(Decode(grpc::ByteBuffer(&slice, 1), &step, &got).ok());
  CHECK(step == 7);
  CHECK(got["late"] == values);
}

TEST_CASE("malformed bytes and sink refusals end the decoding") {
  wire::PullResponse m;
  m.set_step(3);
  wire::TensorData* t = m.add_variables();
  t->mutable_spec()->set_name("x");
  t->mutable_spec()->add_shape(2);
  t->set_dtype(wire::DT_FLOAT32);
  t->set_data(std::string(8, '\0'));
  const std::string good = m.SerializeAsString();
  const std::string cut = good.substr(0, good.size() - 3);
  grpc::Slice slice(cut);
  int64_t step;
  std::map<std::string, std::vector<float>> got;
  absl::Status s = Decode(grpc::ByteBuffer(&slice, 1), &step, &got);
  CHECK(s.code() == absl::StatusCode::kDataLoss);

  grpc::ByteBuffer whole = Serialized(m);
  int64_t wait_micros;
  absl::Status refused = DecodePullResponse(
      &whole, &step, &wait_micros,
      [](const TensorBytes& t, size_t) -> absl::StatusOr<char*> {
        return absl::InvalidArgumentError(std::string(t.name));
      });
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.message() == "x");

  t->set_dtype(wire::DATA_TYPE_UNSPECIFIED);
  grpc::ByteBuffer unspecified = Serialized(m);
  absl::Status dtype = Decode(std::move(unspecified), &step, &got);
  CHECK(dtype.code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a float16 tensor's scale goes both ways, in any field order") {
  std::vector<uint16_t> half(3072, 0x3c00);
  TensorBytes t{"h", kBigShape, DType::kFloat16,
                absl::string_view(reinterpret_cast<const char*>(half.data()),
                                  half.size() * 2),
                0.25f};
  wire::PullResponse header;
  header.set_step(3);
  grpc::ByteBuffer encoded = EncodeWithTensors(
      header, wire::PullResponse::kVariablesFieldNumber, {&t, 1}, nullptr);
  wire::PullResponse parsed;
  REQUIRE(parsed.ParseFromString(Flatten(encoded)));
  REQUIRE(parsed.variables_size() == 1);
  CHECK(parsed.variables(0).has_scale());
  CHECK(parsed.variables(0).scale() == 0.25f);
  CHECK(parsed.variables(0).dtype() == wire::DT_FLOAT16);

  // The generated code writes the scale after the data: the done callback
  // still sees it, with the data where the sink put it.
  for (const grpc::ByteBuffer& bytes : {encoded, Serialized(parsed)}) {
    grpc::ByteBuffer buffer(bytes);
    std::vector<uint16_t> got;
    std::optional<float> scale;
    int64_t step = 0, wait = 0;
    REQUIRE(DecodePullResponse(
                &buffer, &step, &wait,
                [&](const TensorBytes& m, size_t n) {
                  got.resize(n / 2);
                  return reinterpret_cast<char*>(got.data());
                },
                nullptr,
                [&](const TensorBytes& done) {
                  scale = done.scale;
                  CHECK(done.data.data() ==
                        reinterpret_cast<const char*>(got.data()));
                  CHECK(done.data.size() == half.size() * 2);
                  return absl::OkStatus();
                })
                .ok());
    CHECK(step == 3);
    CHECK(got == half);
    CHECK(scale == 0.25f);
  }
}

TEST_CASE(
    "a push's marker for a variable without a gradient: name and "
    "shape, no bytes, read back as such (also through bfloat16)") {
  std::vector<float> w(3072, 0.5f);
  TensorBytes marker{"frozen", kSmallShape, DType::kFloat32, {}, std::nullopt};
  marker.no_gradient = true;
  wire::PushRequest header;
  header.set_worker_id(1);
  grpc::ByteBuffer encoded = EncodeWithTensors(
      header, wire::PushRequest::kGradientsFieldNumber,
      {FloatTensorBytes("w", kBigShape, w.data()), marker}, nullptr);
  wire::PushRequest parsed;
  REQUIRE(parsed.ParseFromString(Flatten(encoded)));
  REQUIRE(parsed.gradients_size() == 2);
  CHECK_FALSE(parsed.gradients(0).no_gradient());
  CHECK(parsed.gradients(1).no_gradient());
  CHECK(parsed.gradients(1).data().empty());
  absl::StatusOr<std::vector<TensorBytes>> back =
      TensorBytesFromProto(parsed.gradients());
  REQUIRE(back.ok());
  CHECK((*back)[1].no_gradient);
  CHECK((*back)[1].name == "frozen");
  CHECK(std::vector<int64_t>((*back)[1].shape.begin(),
                             (*back)[1].shape.end()) == kSmallShape);

  // A bfloat16 push: the encoder and decoder pass the marker through.
  WireEncoder encoder;
  const std::vector<TensorBytes> floats = {
      FloatTensorBytes("w", kBigShape, w.data()), marker};
  absl::Span<const TensorBytes> bf16 =
      encoder.FromFloat(floats, DType::kBFloat16);
  CHECK(bf16[1].no_gradient);
  CHECK(bf16[1].data.empty());
  WireDecoder decoder;
  auto decoded = decoder.ToFloat(bf16, DType::kBFloat16, "gradient");
  REQUIRE(decoded.ok());
  CHECK((*decoded)[1].no_gradient);
  CHECK((*decoded)[1].dtype == DType::kFloat32);
  CHECK((*decoded)[0].data.size() == w.size() * sizeof(float));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
