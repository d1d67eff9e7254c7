#include "common/grpc_status.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

TEST_CASE("every status code survives the round trip with its message") {
  for (int code = 0; code <= 16; ++code) {
    absl::Status s(static_cast<absl::StatusCode>(code),
                   code == 0 ? "" : "message " + std::to_string(code));
    grpc::Status g = ToGrpcStatus(s);
    CHECK(static_cast<int>(g.error_code()) == code);
    CHECK(g.error_message() == std::string(s.message()));
    absl::Status back = FromGrpcStatus(g);
    CHECK(back == s);
  }
}

TEST_CASE("an absl code outside the shared range becomes UNKNOWN") {
  // absl::Status keeps the raw int; grpc::StatusCode cannot hold it.
  absl::Status s(static_cast<absl::StatusCode>(99), "odd");
  grpc::Status g = ToGrpcStatus(s);
  CHECK(g.error_code() == grpc::StatusCode::UNKNOWN);
  CHECK(g.error_message() == "odd");
}

TEST_CASE(
    "payloads survive the round trip; details that do not parse are left out") {
  absl::Status s = absl::FailedPreconditionError("refused");
  s.SetPayload("type.example/a", absl::Cord("one"));
  s.SetPayload("type.example/b", absl::Cord(std::string("\0\xff", 2)));
  grpc::Status g = ToGrpcStatus(s);
  CHECK_FALSE(g.error_details().empty());
  absl::Status back = FromGrpcStatus(g);
  CHECK(back == s);  // code, message and every payload
  REQUIRE(back.GetPayload("type.example/b").has_value());
  CHECK(std::string(*back.GetPayload("type.example/b")) ==
        std::string("\0\xff", 2));

  grpc::Status odd(grpc::StatusCode::ABORTED, "odd", "\xff\xff not a proto");
  absl::Status read = FromGrpcStatus(odd);
  CHECK(read == absl::AbortedError("odd"));
}

}  // namespace
}  // namespace psgd
