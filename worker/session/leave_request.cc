#include "worker/session/leave_request.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace psgd {
namespace {

std::atomic<bool> leave_requested{false};

// For a thread started before InstallLeaveOnSigterm (OpenBLAS starts its
// pool when it is loaded, before main), where SIGTERM is not blocked: such a
// thread runs no JIT code, and an atomic store is async-signal-safe.
void OnSigterm(int) { leave_requested.store(true); }

sigset_t Sigterm() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

const char kLeaveRequested[] =
    "asked to leave (SIGTERM): left at a step boundary";

void InstallLeaveOnSigterm() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Blocked here, so in every thread started after this one (they inherit
    // the mask): no thread is ever interrupted by SIGTERM. A handler would
    // be: a signal that lands in oneDNN's JIT gemm, which points the stack
    // pointer into the heap, writes its frame over the heap (glibc then
    // aborts in a later free, "corrupted size vs. prev_size").
    const sigset_t set = Sigterm();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    struct sigaction action = {};
    action.sa_handler = OnSigterm;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    std::thread([set] {
      for (;;) {
        int signal = 0;
        if (sigwait(&set, &signal) == 0 && signal == SIGTERM) {
          leave_requested.store(true);
        }
      }
    }).detach();
  });
}

void RequestLeave() { leave_requested.store(true); }

bool LeaveRequested() { return leave_requested.load(); }

void ResetLeaveRequestForTesting() { leave_requested.store(false); }

}  // namespace psgd
