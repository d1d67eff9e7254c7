// absl::Mutex's deadlock detection, off for a program that serves.
//
// Debian's Abseil is built without NDEBUG, so every absl::Mutex - gRPC's
// own locks are absl::Mutex - records the order in which a thread takes
// locks in a global graph (a stack trace per new edge, a global spin lock
// around the graph) and aborts the process on a cycle. Upstream's release
// builds leave it off. In ps_bench (2 shards, 16 workers, async) it took
// 2.1-2.3% of all the CPU (docs/PERFORMANCE.md).
//
//   std::string what = psgd::TuneMutexesForServing();  // first in main
//
// It turns the detection off (absl::SetMutexDeadlockDetectionMode) unless
// PSGD_MUTEX_DEADLOCK_DETECTION=1 is set in the environment, which keeps
// absl's default (abort on a lock-order cycle) for debugging. Tests do not
// call it: they keep the detection.
#ifndef PSGD_COMMON_MUTEX_TUNING_H_
#define PSGD_COMMON_MUTEX_TUNING_H_

#include <string>

namespace psgd {

// Returns what it did, for the program's log ("mutexes: ..."). Call it
// before the program starts threads.
std::string TuneMutexesForServing();

}  // namespace psgd

#endif  // PSGD_COMMON_MUTEX_TUNING_H_
