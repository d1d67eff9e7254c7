// What the shard fuzzer compares before and after a request: everything a
// ParameterShard shows from outside (Status, the current weights, the
// optimizer slots), and the invariants that hold between requests.
// A violated check aborts with a message, so that libFuzzer reports it.
//
// Thread-safety: not thread-safe; the fuzzer is single-threaded.
#ifndef PSGD_TESTS_FUZZ_SHARD_PICTURE_H_
#define PSGD_TESTS_FUZZ_SHARD_PICTURE_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace fuzz {

// Prints "shard fuzz: <condition>: <message>" and aborts.
[[noreturn]] void Fail(absl::string_view condition, absl::string_view message);

// Aborts unless `condition`; the message (StrCat of the rest) is built only
// then.
#define FUZZ_EXPECT(condition, ...)                                \
  do {                                                             \
    if (!(condition)) {                                            \
      ::psgd::fuzz::Fail(#condition, ::absl::StrCat(__VA_ARGS__)); \
    }                                                              \
  } while (0)

struct ShardPicture {
  ps::ShardStatus status;
  // The current weights; null before Initialize and after Shutdown.
  ps::ParameterShard::Snapshot snapshot;
  // Copies, in layout order: what the snapshot held when the picture was
  // taken (an update in place would show), and Adam's slots (SGD has none).
  std::vector<std::vector<float>> weights, m, v;

  static ShardPicture Of(ps::ParameterShard& shard);
};

// Aborts with the first difference unless `a` and `b` show the same shard,
// apart from the counters of refused pushes (which a refusal moves). `what`
// names the request. `data`: the data queue's position and counters too
// (a request that may move a chunk, such as a drop, passes false).
void ExpectSameState(const ShardPicture& a, const ShardPicture& b,
                     absl::string_view what, bool data = true);

// Aborts unless `a` and `b` hold the same weights and optimizer slots, bit
// for bit (a rollback against what was saved).
void ExpectSameWeights(const ShardPicture& a, const ShardPicture& b,
                       absl::string_view what);

// Aborts unless `p` is consistent on its own: finite weights and slots, the
// step equal to the updates counted, a pending sync aggregate below the
// gradients a step needs, live workers in range and ascending.
void ExpectConsistent(const ShardPicture& p, const ps::ShardOptions& options);

}  // namespace fuzz
}  // namespace psgd

#endif  // PSGD_TESTS_FUZZ_SHARD_PICTURE_H_
