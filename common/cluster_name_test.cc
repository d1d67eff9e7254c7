#include "common/cluster_name.h"

#include <catch2/catch.hpp>
#include <string>

namespace psgd {
namespace {

TEST_CASE("cluster names: 1..64 letters, digits, '-', '_' or '.'") {
  CHECK(IsValidClusterName("a"));
  CHECK(IsValidClusterName("sync-2ps_4workers.v1"));
  CHECK(IsValidClusterName(std::string(64, 'x')));
  CHECK_FALSE(IsValidClusterName(""));
  CHECK_FALSE(IsValidClusterName(std::string(65, 'x')));
  CHECK_FALSE(IsValidClusterName("a b"));
  CHECK_FALSE(IsValidClusterName("a/b"));
  CHECK_FALSE(IsValidClusterName("caf\xc3\xa9"));
}

}  // namespace
}  // namespace psgd
