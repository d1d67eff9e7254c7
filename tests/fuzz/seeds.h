// The seed corpus of the shard fuzzer (tests/fuzz/corpus/), written out by
// //tests/fuzz:make_seeds: inputs that reach each part of the shard (sync
// rounds with backup workers, async staleness, leases, waiting pulls,
// Shutdown) and each documented refusal, so that libFuzzer starts from deep
// states rather than from random bytes. //tests/fuzz:shard_fuzz_test checks
// that the corpus holds exactly these bytes.
//
// Thread-safety: a pure function.
#ifndef PSGD_TESTS_FUZZ_SEEDS_H_
#define PSGD_TESTS_FUZZ_SEEDS_H_

#include <string>
#include <utility>
#include <vector>

namespace psgd {
namespace fuzz {

// (file name, bytes), in a fixed order.
std::vector<std::pair<std::string, std::string>> SeedInputs();

}  // namespace fuzz
}  // namespace psgd

#endif  // PSGD_TESTS_FUZZ_SEEDS_H_
