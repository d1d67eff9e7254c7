#include "worker/session/lease_keeper.h"

#include <utility>

#include "spdlog/spdlog.h"

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

bool LeaseKeeper::Acquire(std::string what) {
  MutexLock lock(&mu_);
  if (holds_++ == 0) silent_since_ = absl::Now();
  if (what.empty() || !what_.empty()) return false;
  what_ = std::move(what);
  what_since_ = absl::Now();
  reported_ = false;
  return true;
}

void LeaseKeeper::Release(bool named) {
  MutexLock lock(&mu_);
  --holds_;
  if (named) {
    if (reported_) {
      spdlog::info("{}: done after waiting {:.1f} s", what_,
                   absl::ToDoubleSeconds(absl::Now() - what_since_));
    }
    what_.clear();
  }
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
    if (!what_.empty() && !reported_ &&
        absl::Now() - what_since_ >= kWaitReportAfter) {
      spdlog::warn(
          "{}: waiting {:.1f} s for the parameter servers (a shard paused, "
          "cut off or far behind?); the lease on shard 0 is kept meanwhile",
          what_, absl::ToDoubleSeconds(absl::Now() - what_since_));
      reported_ = true;
    }
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

LeaseKeeper::Hold::Hold(LeaseKeeper* keeper, std::string what)
    : keeper_(keeper) {
  if (keeper_ != nullptr) named_ = keeper_->Acquire(std::move(what));
}

LeaseKeeper::Hold::~Hold() {
  if (keeper_ != nullptr) keeper_->Release(named_);
}

}  // namespace psgd
