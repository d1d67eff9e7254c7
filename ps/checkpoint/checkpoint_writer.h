// Writes a shard's checkpoints on a thread of its own, in the order they
// were handed over, so that the shard never waits for the disk: the shard
// copies its state under its lock (ps/shard/shard.h) and hands the copy here.
//
//   CheckpointWriter writer(*CheckpointStore::Open(options));
//   writer.Save(std::move(checkpoint));   // returns at once
//   writer.Flush();                       // waits for the disk
//
// At most kMaxQueued saves wait; when the disk falls further behind, the
// oldest waiting save is dropped and counted as failed (a missing shard file
// makes its checkpoint incomplete, and restoring falls back to an older one).
//
// Thread-safety: thread-safe. The destructor finishes the queued work.
#ifndef PSGD_PS_CHECKPOINT_CHECKPOINT_WRITER_H_
#define PSGD_PS_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/checkpoint/checkpoint_store.h"

namespace psgd {
namespace ps {

class CheckpointWriter {
 public:
  static constexpr int kMaxQueued = 4;

  struct Stats {
    int64_t written = 0;
    int64_t failed = 0;
    int64_t last_label = -1;  // of the last checkpoint written
    // The newest checkpoint this shard saw complete after writing its file
    // (CheckpointStore::IsMarkedComplete); -1 for none. A last_label far
    // ahead of it means the other shards' files are not coming.
    int64_t last_complete_label = -1;
    std::string last_error;  // of the last failure
  };

  explicit CheckpointWriter(std::unique_ptr<CheckpointStore> store);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The store, for reads (it is thread-safe).
  CheckpointStore& store() { return *store_; }

  // Queues a checkpoint to be written (CheckpointStore::Write).
  void Save(std::unique_ptr<const ShardCheckpoint> checkpoint);
  // Queues CheckpointStore::DeleteNewerThan(label), after the saves queued
  // before it.
  void DeleteNewerThan(int64_t label);
  // Waits until everything queued before the call is done.
  void Flush();

  Stats stats() const;

 private:
  struct Task {
    std::unique_ptr<const ShardCheckpoint> save;  // or, when null:
    int64_t delete_newer_than = -1;
  };
  void Run();

  const std::unique_ptr<CheckpointStore> store_;
  mutable Mutex mu_;
  CondVar changed_;  // a task queued or finished, or stopping
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // tasks ever queued
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;    // tasks finished or dropped
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the fields above exist
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_CHECKPOINT_CHECKPOINT_WRITER_H_
