#include "ps/checkpoint/agreement.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace ps {
namespace {

CompleteCheckpointInfo C(int64_t label, int64_t generation = 1) {
  return {label, generation, label};
}

TEST_CASE("the newest checkpoint every shard has") {
  // ps:1 died before writing step-300; ps:0 has pruned step-150.
  CHECK(AgreeOnCheckpoint(
            {{C(300), C(250), C(200)}, {C(250), C(200), C(150)}}) == 250);
  CHECK(AgreeOnCheckpoint({{C(0)}, {C(0)}, {C(0)}}) == 0);
  // Order does not matter.
  CHECK(AgreeOnCheckpoint({{C(10), C(20)}, {C(20), C(10)}}) == 20);
}

TEST_CASE("nothing in common: start empty") {
  CHECK(AgreeOnCheckpoint({{C(300)}, {C(250)}}) == -1);
  CHECK(AgreeOnCheckpoint({{}, {C(250)}}) == -1);
  CHECK(AgreeOnCheckpoint({{}, {}}) == -1);
  CHECK(AgreeOnCheckpoint({}) == -1);
}

TEST_CASE("a label of two histories does not count") {
  // After a rollback to step-100 (generation 2), ps:0 saved step-150 again
  // in generation 2; ps:1's step-150 is of generation 1 (it was down).
  CHECK(AgreeOnCheckpoint({{C(150, 2), C(100, 1)}, {C(150, 1), C(100, 1)}}) ==
        100);
  // A shard listing a checkpoint twice counts once.
  CHECK(AgreeOnCheckpoint({{C(5), C(5)}, {C(6)}}) == -1);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
