#include "common/malloc_tuning.h"

#include <malloc.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace psgd {
namespace {

// Blocks mapped on their own, and free bytes at the main heap's top.
size_t MappedBlocks() { return mallinfo2().hblks; }
size_t KeptAtTop() { return mallinfo2().keepcost; }

// Touches every page, as a tensor's buffer is.
void* Take(size_t bytes) {
  void* p = std::malloc(bytes);
  REQUIRE(p != nullptr);
  std::memset(p, 1, bytes);
  return p;
}

// One test case: the settings are the process's, set once.
TEST_CASE("the thresholds: what is mapped alone, what a heap keeps") {
  unsetenv("MALLOC_MMAP_THRESHOLD_");
  unsetenv("MALLOC_TRIM_THRESHOLD_");
  // glibc's default maps a 1 MiB block on its own (128 KiB threshold).
  const size_t mapped_before = MappedBlocks();
  void* early = Take(size_t{1} << 20);
  CHECK(MappedBlocks() == mapped_before + 1);
  std::free(early);

  CHECK(TuneMallocForTensors().find("MiB kept free") != std::string::npos);

  // Below kMallocMmapThreshold: from the heap; at it: mapped alone.
  const size_t mapped = MappedBlocks();
  void* small = Take(kMallocMmapThreshold / 2);
  CHECK(MappedBlocks() == mapped);
  void* large = Take(kMallocMmapThreshold);
  CHECK(MappedBlocks() == mapped + 1);
  std::free(large);
  CHECK(MappedBlocks() == mapped);  // given back at once
  std::free(small);

  // 24 MiB freed from the main heap's top stay there for the next step
  // (glibc's default trims above 128 KiB).
  std::vector<void*> blocks;
  for (int i = 0; i < 24; ++i) blocks.push_back(Take(size_t{1} << 20));
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
  CHECK(KeptAtTop() >= (size_t{22} << 20));
  CHECK(KeptAtTop() <= kMallocTrimThreshold + (size_t{1} << 20));

  // The environment's own setting stands.
  setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1);
  CHECK(TuneMallocForTensors().find("MALLOC_TRIM_THRESHOLD_ is set") !=
        std::string::npos);
  unsetenv("MALLOC_TRIM_THRESHOLD_");
}

}  // namespace
}  // namespace psgd
