#include "ps/checkpoint/checkpoint_writer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {

CheckpointWriter::CheckpointWriter(std::unique_ptr<CheckpointStore> store)
    : store_(std::move(store)), thread_([this] { Run(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    changed_.SignalAll();
  }
  thread_.join();
}

void CheckpointWriter::Save(std::unique_ptr<const ShardCheckpoint> checkpoint) {
  MutexLock lock(&mu_);
  int waiting_saves = 0;
  for (const Task& t : queue_) waiting_saves += t.save != nullptr;
  if (waiting_saves >= kMaxQueued) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->save == nullptr) continue;
      ++stats_.failed;
      stats_.last_error =
          absl::StrCat("checkpoint step-", it->save->label,
                       " dropped: the disk is slower than the checkpoints (",
                       kMaxQueued, " waiting)");
      queue_.erase(it);
      ++done_;
      break;
    }
  }
  queue_.push_back(Task{std::move(checkpoint), -1});
  ++queued_;
  changed_.SignalAll();
}

void CheckpointWriter::DeleteNewerThan(int64_t label) {
  MutexLock lock(&mu_);
  queue_.push_back(Task{nullptr, label});
  ++queued_;
  changed_.SignalAll();
}

void CheckpointWriter::Flush() {
  MutexLock lock(&mu_);
  const int64_t target = queued_;
  changed_.WaitUntil(&mu_, absl::InfiniteFuture(), [&]() {
    mu_.AssertHeld();
    return done_ >= target;
  });
}

CheckpointWriter::Stats CheckpointWriter::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

void CheckpointWriter::Run() {
  for (;;) {
    Task task;
    {
      MutexLock lock(&mu_);
      changed_.WaitUntil(&mu_, absl::InfiniteFuture(), [&]() {
        mu_.AssertHeld();
        return stopping_ || !queue_.empty();
      });
      if (queue_.empty()) return;  // stopping, and everything is done
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status status = task.save != nullptr
                              ? store_->Write(*task.save)
                              : store_->DeleteNewerThan(task.delete_newer_than);
    const bool complete = status.ok() && task.save != nullptr &&
                          store_->IsMarkedComplete(task.save->label);
    MutexLock lock(&mu_);
    if (status.ok() && task.save != nullptr) {
      ++stats_.written;
      stats_.last_label = task.save->label;
      if (complete) {
        stats_.last_complete_label =
            std::max(stats_.last_complete_label, task.save->label);
      }
    } else if (!status.ok()) {
      ++stats_.failed;
      stats_.last_error = std::string(status.message());
    }
    ++done_;
    changed_.SignalAll();
  }
}

}  // namespace ps
}  // namespace psgd
