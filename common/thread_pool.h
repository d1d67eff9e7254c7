// A small fixed pool of threads for data-parallel loops in the CPU kernels.
//
//   ThreadPool pool(2, ThreadPool::Runtime::kOpenMp);
//   pool.ParallelFor(planes, 1, [&](int64_t begin, int64_t end) { ... });
//
// Two runtimes:
//   kOwnThreads  num_threads - 1 std::threads of its own.
//   kOpenMp      the calling thread's OpenMP team, the same threads that
//                oneDNN uses. After a parallel region libgomp's workers spin
//                for a while (milliseconds) before they sleep; threads of our
//                own would then compete with them for the cores at every
//                switch between a oneDNN op and one of ours. Sharing the
//                team avoids that (docs/PERFORMANCE.md has the measurement).
// ThreadSanitizer cannot see libgomp's barriers, so tsan builds use
// kOwnThreads (see CpuBackend). A clang build's team comes from LLVM's
// libomp, beside oneDNN's libgomp: correct (thread_pool_test links as the
// binaries do), but not shared with oneDNN.
//
// Thread-safety: ParallelFor may be called from any thread; a call made
// while another one's loop runs does its loop on its caller's thread alone
// (the pool's threads are busy, and so are the cores). The calling thread takes
// part in the loop, so a pool of N threads starts N - 1. The destructor joins
// the threads and must not run while a ParallelFor is in progress.
//
// The locks are common/mutex.h's rather than absl::Mutex: Debian's Abseil is
// not built with ThreadSanitizer, which therefore cannot see absl::Mutex's
// ordering and reports false races; common/mutex.h locks std::mutex, which
// it intercepts, and carries the annotations --config=tsa checks.
#ifndef PSGD_COMMON_THREAD_POOL_H_
#define PSGD_COMMON_THREAD_POOL_H_

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/mutex.h"

namespace psgd {

class ThreadPool {
 public:
  enum class Runtime { kOwnThreads, kOpenMp };

  // num_threads >= 1 counts the caller; values below 1 are taken as 1.
  explicit ThreadPool(int num_threads, Runtime runtime = Runtime::kOwnThreads);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  Runtime runtime() const { return runtime_; }

  // Splits [0, n) into at most num_threads() contiguous chunks of at least
  // `min_chunk` elements (the last may be shorter when n is) and runs
  // fn(begin, end) on each, the caller taking the first (one chunk, the
  // caller's, while another call's loop has the threads). Returns when every
  // chunk is done. fn must not call ParallelFor on the same pool.
  void ParallelFor(int64_t n, int64_t min_chunk,
                   absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void WorkerLoop(int index);
  void ParallelForOpenMp(int64_t n, int chunks,
                         absl::FunctionRef<void(int64_t, int64_t)> fn);

  // Constant after construction.
  const int num_threads_;
  const Runtime runtime_;
  std::vector<std::thread> workers_;

  // Held for a whole ParallelFor that uses the threads; a call that finds it
  // held runs alone.
  Mutex run_mu_;

  Mutex mu_;
  CondVar work_cv_;  // generation_ or stop_ changed
  CondVar done_cv_;  // pending_ reached 0
  // The loop being run: generation_ counts loops; workers 1..chunks_-1 take
  // one chunk each and count pending_ down.
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  const absl::FunctionRef<void(int64_t, int64_t)>* fn_ ABSL_GUARDED_BY(mu_) =
      nullptr;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
  int chunks_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// Runs fn(k, begin, end) over pieces [begin, end) of every range [0,
// sizes[k]), the ranges laid end to end and that whole split into at most
// pool->num_threads() contiguous parts of at least `min_chunk` elements
// (ThreadPool::ParallelFor), each part on a thread of its own: a range may
// be cut between two threads, and a part may hold several small ranges.
// Every element of every range is in exactly one call; a thread's calls go
// in order of k. `pool` null: one thread, the caller (fn(k, 0, sizes[k])
// for each k). What the servers' element-wise loops over a shard's
// variables use (their copies and optimizer updates).
void ParallelForSpans(
    ThreadPool* pool, absl::Span<const int64_t> sizes, int64_t min_chunk,
    absl::FunctionRef<void(size_t k, int64_t begin, int64_t end)> fn);

// The least worth a thread's part of a bulk loop (the servers' updates,
// checks and copies): below about 4 MiB a part, waking a pool thread costs
// what the split saves. With 256 KiB parts a parameter server with four
// workers made 7-12% fewer steps than with no pool (docs/PERFORMANCE.md).
inline constexpr int64_t kMinBulkPartBytes = int64_t{4} << 20;
// The same in float32 elements (the servers' loops over tensors).
inline constexpr int64_t kMinBulkPartFloats = kMinBulkPartBytes / 4;

// The machine's cores (std::thread::hardware_concurrency, 1 when it does not
// know), at most `at_most`: the default size of the pools of bulk copies and
// updates, which memory bounds more than cores.
int MachineThreads(int at_most);

// memcpy(dst, src, bytes) on the pool's threads, each a part of at least
// kMinBulkPartBytes (fewer bytes: on the caller's alone; `pool` null: the
// same).
void ParallelCopy(ThreadPool* pool, void* dst, const void* src, size_t bytes);

}  // namespace psgd

#endif  // PSGD_COMMON_THREAD_POOL_H_
