#include "common/logging.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

TEST_CASE("log levels parse by name and unknown ones are refused") {
  spdlog::level::level_enum level;
  REQUIRE(ParseLogLevel("debug", &level).ok());
  CHECK(level == spdlog::level::debug);
  REQUIRE(ParseLogLevel("error", &level).ok());
  CHECK(level == spdlog::level::err);
  absl::Status s = ParseLogLevel("loud", &level);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("'loud'") != absl::string_view::npos);
}

TEST_CASE("InitLogging sets level and process prefix, and may run twice") {
  REQUIRE(InitLogging("ps:1", "warn").ok());
  CHECK(spdlog::get_level() == spdlog::level::warn);
  CHECK(spdlog::default_logger()->name() == "ps:1");
  REQUIRE(InitLogging("worker:0", "debug").ok());
  CHECK(spdlog::get_level() == spdlog::level::debug);
  CHECK(spdlog::default_logger()->name() == "worker:0");
  CHECK(LogPattern("worker:0").find("[worker:0]") != std::string::npos);
  // A bad level changes nothing.
  CHECK(!InitLogging("x", "nope").ok());
  CHECK(spdlog::default_logger()->name() == "worker:0");
}

}  // namespace
}  // namespace psgd
