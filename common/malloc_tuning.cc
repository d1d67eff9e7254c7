#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace psgd {

std::string TuneMallocForTensors() {
  for (const char* name :
       {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"}) {
    if (std::getenv(name) != nullptr) {
      return absl::StrCat("malloc: ", name,
                          " is set in the environment; glibc's thresholds "
                          "left as it says");
    }
  }
  const bool mmap_set =
      mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThreshold)) == 1;
  const bool trim_set =
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocTrimThreshold)) == 1;
  if (!mmap_set || !trim_set) {
    return "malloc: glibc refused the thresholds; its defaults stand";
  }
  return absl::StrCat("malloc: blocks of ", kMallocMmapThreshold >> 20,
                      " MiB and more mapped on their own, up to ",
                      kMallocTrimThreshold >> 20,
                      " MiB kept free at a heap's top");
}

}  // namespace psgd
