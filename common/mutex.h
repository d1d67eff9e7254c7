// Mutex, MutexLock, CondVar and Notification for psgd, on std::mutex and
// std::condition_variable, with Abseil's thread-safety annotations.
//
// Why not absl::Mutex: Debian's Abseil is a prebuilt library that is not
// built with ThreadSanitizer, so tsan does not see absl::Mutex lock and
// unlock (they happen inside the library) and reports a race on every field
// such a mutex guards; the same holds for absl::Notification and
// absl::CondVar. std::mutex locks through pthread_mutex_lock, which tsan
// intercepts, so our concurrency tests can run under --config=tsan.
//
// Thread-safety: these are the synchronisation primitives.
#ifndef PSGD_COMMON_MUTEX_H_
#define PSGD_COMMON_MUTEX_H_

#include <condition_variable>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace psgd {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Takes the lock when it is free (true); false at once when it is held.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return mu_.try_lock();
  }
  // Tells the thread-safety analysis that the caller holds the lock (in a
  // lambda that runs under it); checks nothing at run time.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // Waits, with `mu` held (released while waiting), until done() holds or
  // `deadline` passes; returns done().
  template <typename Predicate>
  bool WaitUntil(Mutex* mu, absl::Time deadline, Predicate done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    bool result;
    if (deadline == absl::InfiniteFuture()) {
      cv_.wait(lock, done);
      result = true;
    } else {
      result = cv_.wait_until(lock, absl::ToChronoTime(deadline), done);
    }
    lock.release();  // `mu` stays held, as the caller's MutexLock expects
    return result;
  }

  // WaitUntil with no deadline.
  template <typename Predicate>
  void Wait(Mutex* mu, Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    WaitUntil(mu, absl::InfiniteFuture(), std::move(done));
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A one-shot event, as absl::Notification.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  bool HasBeenNotified() {
    MutexLock lock(&mu_);
    return notified_;
  }
  // True when notified before `deadline`.
  bool WaitForNotificationWithDeadline(absl::Time deadline) {
    MutexLock lock(&mu_);
    return cv_.WaitUntil(&mu_, deadline, [this]() {
      mu_.AssertHeld();
      return notified_;
    });
  }
  void WaitForNotification() {
    WaitForNotificationWithDeadline(absl::InfiniteFuture());
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psgd

#endif  // PSGD_COMMON_MUTEX_H_
