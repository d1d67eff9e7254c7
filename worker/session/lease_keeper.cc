#include "worker/session/lease_keeper.h"

namespace psgd {

LeaseKeeper::LeaseKeeper(ps::PsClient* client, absl::Duration period)
    : client_(client), period_(period), thread_([this]() { Run(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  thread_.join();
}

void LeaseKeeper::Acquire() {
  MutexLock lock(&mu_);
  if (holds_++ == 0) silent_since_ = absl::Now();
}

void LeaseKeeper::Release() {
  MutexLock lock(&mu_);
  --holds_;
  // No renewal outlives the last hold: a Join still in flight could land
  // after what the worker sends next (its Leave, which it would undo).
  if (holds_ == 0 && renewing_) {
    changed_.WaitUntil(&mu_, absl::InfiniteFuture(), [this]() {
      mu_.AssertHeld();
      return !renewing_;
    });
  }
}

void LeaseKeeper::Run() {
  mu_.Lock();
  for (;;) {
    // A tick every period; holds come and go between them unseen, at the
    // cost of two lock operations each.
    changed_.WaitUntil(&mu_, absl::Now() + period_, [this]() {
      mu_.AssertHeld();
      return stop_;
    });
    if (stop_) break;
    ++rounds_;
    if (holds_ == 0 || absl::Now() - silent_since_ < period_) continue;
    renewing_ = true;
    mu_.Unlock();
    client_->RenewLease().IgnoreError();
    ++renewals_;
    mu_.Lock();
    renewing_ = false;
    changed_.SignalAll();
  }
  mu_.Unlock();
}

LeaseKeeper::Hold::Hold(LeaseKeeper* keeper) : keeper_(keeper) {
  if (keeper_ != nullptr) keeper_->Acquire();
}

LeaseKeeper::Hold::~Hold() {
  if (keeper_ != nullptr) keeper_->Release();
}

}  // namespace psgd
