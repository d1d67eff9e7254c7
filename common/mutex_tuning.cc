#include "common/mutex_tuning.h"

#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"

namespace psgd {

std::string TuneMutexesForServing() {
  const char* keep = std::getenv("PSGD_MUTEX_DEADLOCK_DETECTION");
  if (keep != nullptr && std::strcmp(keep, "1") == 0) {
    return "mutexes: absl's deadlock detection kept "
           "(PSGD_MUTEX_DEADLOCK_DETECTION=1)";
  }
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return "mutexes: absl's deadlock detection off "
         "(PSGD_MUTEX_DEADLOCK_DETECTION=1 keeps it)";
}

}  // namespace psgd
