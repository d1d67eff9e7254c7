// The shard fuzzer's main() when it is built without libFuzzer (any build
// but --config=fuzz): runs each input file, or every file of each directory,
// once. For reproducing a libFuzzer finding under gcc, asan or tsan:
//
//   bazel run --config=asan //tests/fuzz:shard_fuzzer -- $PWD/crash-1234
#include <cstdio>
#include <string>

#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/shard_fuzz.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    auto inputs = psgd::fuzz::ReadInputs(argv[i]);
    if (!inputs.ok()) {
      std::fprintf(stderr, "%s\n", inputs.status().ToString().c_str());
      return 2;
    }
    for (const auto& [path, bytes] : *inputs) {
      std::fprintf(stderr, "running %s (%zu bytes)\n", path.c_str(),
                   bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                             bytes.size());
      ++runs;
    }
  }
  std::fprintf(stderr, "%d inputs ran without a finding\n", runs);
  return 0;
}
