// TuneMutexesForServing: absl::Mutex's deadlock detection off, unless
// PSGD_MUTEX_DEADLOCK_DETECTION=1 keeps it. Read from what the detection
// does: a lock-order inversion (A then B, later B then A, in one thread: a
// cycle in the lock graph, though nothing waits) aborts the process while
// it is on (Debian's Abseil is built without NDEBUG) and passes while off.
#include "common/mutex_tuning.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>

#include "absl/synchronization/mutex.h"

namespace psgd {
namespace {

void InvertLockOrder() {
  absl::Mutex a;
  absl::Mutex b;
  {
    absl::MutexLock la(&a);
    absl::MutexLock lb(&b);
  }
  {
    absl::MutexLock lb(&b);
    absl::MutexLock la(&a);
  }
}

// The exit status of a child that tunes the mutexes with the environment
// variable `value` (nullptr: unset), then inverts a lock order.
int ChildStatus(const char* value) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // absl's abort, not Catch's handler of it in the child.
    std::signal(SIGABRT, SIG_DFL);
    if (value == nullptr) {
      unsetenv("PSGD_MUTEX_DEADLOCK_DETECTION");
    } else {
      setenv("PSGD_MUTEX_DEADLOCK_DETECTION", value, 1);
    }
    TuneMutexesForServing();
    InvertLockOrder();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

TEST_CASE("deadlock detection off: a lock-order inversion passes") {
  const int status = ChildStatus(nullptr);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(ChildStatus("0") == 0);
}

TEST_CASE("PSGD_MUTEX_DEADLOCK_DETECTION=1 keeps absl's detection") {
  const int status = ChildStatus("1");
  // Only where Abseil's detection is on by default (built without NDEBUG,
  // as Debian's is): it aborts on the cycle.
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
}

TEST_CASE("what it did, for the program's log") {
  CHECK(TuneMutexesForServing().rfind("mutexes: ", 0) == 0);
}

}  // namespace
}  // namespace psgd
