// glibc's malloc, set for a process that moves tensors of megabytes.
//
// By default glibc returns the free memory at the top of a heap to the
// kernel whenever it exceeds 128 KiB (a threshold that then moves with the
// sizes freed), so a server that frees a push's buffers and allocates the
// next push's of the same size gets fresh pages, and pays a page fault and
// the kernel's zeroing for every 4 KiB of them, every step. ps_bench's
// server spent 12-22 CPU ms per worker step that way where 5 sufficed
// (docs/PERFORMANCE.md, "glibc's malloc thresholds").
//
//   std::string what = psgd::TuneMallocForTensors();  // first thing in main
//
// It fixes both thresholds (mallopt): blocks of kMallocMmapThreshold and
// more are mapped on their own and given back when freed (a refused 200 MB
// push leaves nothing behind), smaller ones come from the heaps, and a
// heap keeps up to kMallocTrimThreshold of free memory at its top for the
// next step instead of giving it back. Where the environment sets either
// of glibc's own variables (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_)
// it changes nothing: the user's choice stands.
#ifndef PSGD_COMMON_MALLOC_TUNING_H_
#define PSGD_COMMON_MALLOC_TUNING_H_

#include <cstddef>
#include <string>

namespace psgd {

inline constexpr size_t kMallocMmapThreshold = size_t{4} << 20;
inline constexpr size_t kMallocTrimThreshold = size_t{32} << 20;

// Sets the thresholds above unless the environment sets glibc's; returns
// what it did, for the program's log ("malloc: ..."). Call it before the
// program starts threads.
std::string TuneMallocForTensors();

}  // namespace psgd

#endif  // PSGD_COMMON_MALLOC_TUNING_H_
