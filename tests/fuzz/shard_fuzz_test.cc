// The shard fuzzer's harness in every build (gcc, asan, tsan): the seed
// corpus (and the reproducers of past findings) in tests/fuzz/corpus, and
// deterministic mutations of it, through the same LLVMFuzzerTestOneInput
// that libFuzzer drives (scripts/bench/fuzz.sh). A finding aborts the test with
// the harness's message.
#include "tests/fuzz/shard_fuzz.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/seeds.h"

namespace psgd {
namespace fuzz {
namespace {

constexpr char kCorpus[] = "tests/fuzz/corpus";

void Run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
}

TEST_CASE("the corpus holds the seeds as make_seeds writes them") {
  for (const auto& [name, bytes] : SeedInputs()) {
    INFO(name << ": run bazel run //tests/fuzz:make_seeds -- $PWD/" << kCorpus);
    auto file = ReadInputs(std::string(kCorpus) + "/" + name);
    REQUIRE(file.ok());
    CHECK((*file)[0].second == bytes);
  }
}

TEST_CASE("every corpus input runs without a finding") {
  auto inputs = ReadInputs(kCorpus);
  REQUIRE(inputs.ok());
  CHECK(inputs->size() >= SeedInputs().size());
  for (const auto& [path, bytes] : *inputs) {
    INFO(path);
    Run(bytes);
  }
}

TEST_CASE("mutated seeds run without a finding") {
  // A little of what libFuzzer does, deterministically: flip, overwrite,
  // insert and cut bytes of each seed.
  std::mt19937 random(20261121);
  for (const auto& [name, seed] : SeedInputs()) {
    for (int i = 0; i < 200; ++i) {
      std::string bytes = seed;
      const int edits = 1 + static_cast<int>(random() % 4);
      for (int e = 0; e < edits && !bytes.empty(); ++e) {
        const size_t at = random() % bytes.size();
        switch (random() % 4) {
          case 0:
            bytes[at] = static_cast<char>(bytes[at] ^ (1 << (random() % 8)));
            break;
          case 1:
            bytes[at] = static_cast<char>(random());
            break;
          case 2:
            bytes.insert(at, 1, static_cast<char>(random()));
            break;
          case 3:
            bytes.erase(at, random() % 16);
            break;
        }
      }
      Run(bytes);
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace fuzz
}  // namespace psgd
