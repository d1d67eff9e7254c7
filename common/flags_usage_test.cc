#include "common/flags_usage.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

TEST_CASE("--help lists the flags of the project's own files") {
  CHECK(IsProjectFlagFile("ps/server/server_flags.cc"));
  CHECK(IsProjectFlagFile("ps/ps_server_main.cc"));
  CHECK(IsProjectFlagFile("worker/worker_main.cc"));
  CHECK(IsProjectFlagFile("/build/psgd/common/logging.cc"));
  CHECK_FALSE(IsProjectFlagFile("absl/flags/parse.cc"));
  CHECK_FALSE(IsProjectFlagFile("/usr/include/absl/log/flags.cc"));
  CHECK_FALSE(IsProjectFlagFile("external/grpc/src/core/lib/flags.cc"));
}

}  // namespace
}  // namespace psgd
