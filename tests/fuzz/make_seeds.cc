// Writes the shard fuzzer's seed corpus (tests/fuzz/seeds.h) into a
// directory, replacing files of the same names:
//
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus
#include <cstdio>
#include <fstream>
#include <string>

#include "tests/fuzz/seeds.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& [name, bytes] : psgd::fuzz::SeedInputs()) {
    const std::string path = std::string(argv[1]) + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.good()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
  }
  return 0;
}
