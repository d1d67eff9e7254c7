#include "common/status_macros.h"

#include <catch2/catch.hpp>
#include <memory>

namespace psgd {
namespace {

int g_calls = 0;

absl::Status Fails() {
  ++g_calls;
  return absl::NotFoundError("no such thing");
}
absl::Status Succeeds() {
  ++g_calls;
  return absl::OkStatus();
}
absl::StatusOr<std::unique_ptr<int>> MakeInt(bool ok) {
  ++g_calls;
  if (!ok) return absl::InvalidArgumentError("bad int");
  return std::make_unique<int>(42);
}

absl::Status UseReturnIfError(bool fail, int* reached) {
  RETURN_IF_ERROR(Succeeds());
  RETURN_IF_ERROR(fail ? Fails() : Succeeds());
  *reached = 1;
  return absl::OkStatus();
}

absl::StatusOr<int> UseAssignOrReturn(bool ok) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(ok));  // move-only value
  int sum = *p;
  ASSIGN_OR_RETURN(p, MakeInt(true));  // assigns to an existing lvalue
  return sum + *p;
}

TEST_CASE("RETURN_IF_ERROR returns the first error and evaluates once") {
  g_calls = 0;
  int reached = 0;
  absl::Status s = UseReturnIfError(/*fail=*/true, &reached);
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK(s.message() == "no such thing");
  CHECK(reached == 0);
  CHECK(g_calls == 2);

  g_calls = 0;
  CHECK(UseReturnIfError(/*fail=*/false, &reached).ok());
  CHECK(reached == 1);
  CHECK(g_calls == 2);
}

TEST_CASE("ASSIGN_OR_RETURN moves the value or returns the status") {
  g_calls = 0;
  absl::StatusOr<int> ok = UseAssignOrReturn(true);
  REQUIRE(ok.ok());
  CHECK(*ok == 84);
  CHECK(g_calls == 2);

  g_calls = 0;
  absl::StatusOr<int> bad = UseAssignOrReturn(false);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "bad int");
  CHECK(g_calls == 1);
}

TEST_CASE("Annotate keeps the code and prefixes the message") {
  CHECK(Annotate(absl::OkStatus(), "x: ").ok());
  absl::Status s = Annotate(absl::DataLossError("bad crc"), "shard 1: ");
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(s.message() == "shard 1: bad crc");

  absl::Status typed = absl::FailedPreconditionError("refused");
  typed.SetPayload("type.example/reason", absl::Cord("why"));
  absl::Status annotated = Annotate(typed, "push: ");
  CHECK(annotated.message() == "push: refused");
  REQUIRE(annotated.GetPayload("type.example/reason").has_value());
  CHECK(*annotated.GetPayload("type.example/reason") == "why");
}

}  // namespace
}  // namespace psgd
