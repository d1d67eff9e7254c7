// SIGTERM asks the worker to leave, and no thread is ever interrupted by it:
// a signal that lands in oneDNN's JIT gemm while a handler is installed
// corrupts the heap (leave_request.h).
#include "worker/session/leave_request.h"

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "worker/cpu/gemm.h"

namespace psgd {
namespace {

bool SigtermBlockedInThisThread() {
  sigset_t current;
  pthread_sigmask(SIG_BLOCK, nullptr, &current);
  return sigismember(&current, SIGTERM) == 1;
}

// Waits (bounded) for the watcher thread to take a pending SIGTERM.
bool AwaitLeave() {
  for (int i = 0; i < 1000 && !LeaveRequested(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return LeaveRequested();
}

TEST_CASE("SIGTERM is blocked in every later thread and requests a leave") {
  InstallLeaveOnSigterm();
  InstallLeaveOnSigterm();  // Idempotent: one watcher.
  CHECK(SigtermBlockedInThisThread());
  bool blocked_in_new_thread = false;
  std::thread([&] {
    blocked_in_new_thread = SigtermBlockedInThisThread();
  }).join();
  CHECK(blocked_in_new_thread);
  // Each case's own request: the flag is process-wide.
  ResetLeaveRequestForTesting();
  CHECK_FALSE(LeaveRequested());
  REQUIRE(kill(getpid(), SIGTERM) == 0);
  CHECK(AwaitLeave());
}

TEST_CASE("SIGTERMs during oneDNN's gemm on two threads leave the heap whole") {
  InstallLeaveOnSigterm();
  ResetLeaveRequestForTesting();
  CHECK_FALSE(LeaveRequested());
  // A child sends SIGTERM to this process every 100 us until it is killed.
  const pid_t parent = getpid();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;) {
      kill(parent, SIGTERM);
      usleep(100);
    }
  }
  // The tutorial model's dense layer's shapes (its forward and its
  // backward to the data), with the allocator busy around them: with a
  // handler, about half of such runs abort in free.
  const int64_t n = 32, k = 2304, m = 384;
  GemmConfig gemm;
  gemm.threads = 2;
  bool all_ok = true;
  for (int it = 0; it < 1500; ++it) {
    std::vector<float> x(n * k, 1.0f), w(k * m, 0.5f), y(n * m);
    std::vector<void*> blocks;
    for (int j = 0; j < 50; ++j) blocks.push_back(std::malloc(64 + 16 * j));
    all_ok &= Sgemm(gemm, false, false, n, m, k, 1.0f, x.data(), k, w.data(), m,
                    0.0f, y.data(), m)
                  .ok();
    all_ok &= Sgemm(gemm, false, true, n, k, m, 1.0f, y.data(), m, w.data(), m,
                    0.0f, x.data(), k)
                  .ok();
    for (void* p : blocks) std::free(p);
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(all_ok);
  CHECK(AwaitLeave());
}

}  // namespace
}  // namespace psgd
