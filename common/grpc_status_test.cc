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

TEST_CASE("codes outside the shared range become UNKNOWN") {
  grpc::Status g(static_cast<grpc::StatusCode>(99), "odd");
  absl::Status s = FromGrpcStatus(g);
  CHECK(s.code() == absl::StatusCode::kUnknown);
  CHECK(s.message() == "odd");
}

}  // namespace
}  // namespace psgd
