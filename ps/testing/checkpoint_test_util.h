// A small ShardCheckpoint for the tests of the checkpoint format and store,
// and a temporary directory per test.
#ifndef PSGD_PS_TESTING_CHECKPOINT_TEST_UTIL_H_
#define PSGD_PS_TESTING_CHECKPOINT_TEST_UTIL_H_

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "ps/checkpoint/checkpoint.h"

namespace psgd {
namespace ps {
namespace testing {

// A fresh directory under TEST_TMPDIR named `name` (removed first).
std::string FreshDir(const std::string& name);

// Shard `shard` of `num_shards` of cluster "c" at `step`, with variables
// "w" (2, 3) and "b" (2) whose values depend on step and shard, Adam slots,
// 3 workers and some counters.
ShardCheckpoint SmallCheckpoint(int shard, int num_shards, int64_t label,
                                int64_t step, int64_t generation = 1);

}  // namespace testing
}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_TESTING_CHECKPOINT_TEST_UTIL_H_
