#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace psgd {
namespace {

// Chunk `i` of `chunks` over [0, n).
int64_t ChunkBegin(int64_t n, int chunks, int i) { return n * i / chunks; }

}  // namespace

ThreadPool::ThreadPool(int num_threads, Runtime runtime)
    : num_threads_(std::max(num_threads, 1)), runtime_(runtime) {
  if (runtime_ == Runtime::kOpenMp) return;
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  work_cv_.SignalAll();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  const int64_t by_size = n / std::max<int64_t>(min_chunk, 1);
  const int chunks =
      static_cast<int>(std::clamp<int64_t>(by_size, 1, num_threads_));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  if (runtime_ == Runtime::kOpenMp) {
    ParallelForOpenMp(n, chunks, fn);
    return;
  }
  // While another caller's loop has the threads, this one runs on its own
  // thread alone rather than wait: the cores are busy with that loop (the
  // servers' concurrent pushes would otherwise queue here one behind another).
  if (!run_mu_.TryLock()) {
    fn(0, n);
    return;
  }
  {
    MutexLock lock(&mu_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  work_cv_.SignalAll();
  fn(0, ChunkBegin(n, chunks, 1));
  {
    MutexLock lock(&mu_);
    done_cv_.Wait(&mu_, [this]() {
      mu_.AssertHeld();
      return pending_ == 0;
    });
    fn_ = nullptr;
  }
  run_mu_.Unlock();
}

void ThreadPool::ParallelForOpenMp(
    int64_t n, int chunks, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  // The team's threads claim the chunks from a counter, so that each runs
  // once whatever omp_get_thread_num() answers: OpenMP may give fewer
  // threads than asked, and in a clang build (LLVM's libomp makes the team)
  // omp_get_thread_num() binds to oneDNN's libgomp, which answers 0 in
  // every thread of it (each thread ran every chunk: wrong results).
  std::atomic<int> next{0};
#pragma omp parallel num_threads(chunks)
  {
    for (int c = next++; c < chunks; c = next++) {
      fn(ChunkBegin(n, chunks, c), ChunkBegin(n, chunks, c + 1));
    }
  }
}

void ThreadPool::WorkerLoop(int index) {
  int64_t seen = 0;
  for (;;) {
    const absl::FunctionRef<void(int64_t, int64_t)>* fn;
    int64_t n;
    int chunks;
    {
      MutexLock lock(&mu_);
      work_cv_.Wait(&mu_, [this, &seen]() {
        mu_.AssertHeld();
        return stop_ || generation_ != seen;
      });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
      chunks = chunks_;
    }
    if (index >= chunks) continue;
    (*fn)(ChunkBegin(n, chunks, index), ChunkBegin(n, chunks, index + 1));
    bool last;
    {
      MutexLock lock(&mu_);
      last = --pending_ == 0;
    }
    if (last) done_cv_.Signal();
  }
}

void ParallelForSpans(
    ThreadPool* pool, absl::Span<const int64_t> sizes, int64_t min_chunk,
    absl::FunctionRef<void(size_t k, int64_t begin, int64_t end)> fn) {
  if (pool == nullptr || pool->num_threads() == 1) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (sizes[k] > 0) fn(k, 0, sizes[k]);
    }
    return;
  }
  // starts[k]: where range k begins in the whole.
  std::vector<int64_t> starts(sizes.size() + 1, 0);
  for (size_t k = 0; k < sizes.size(); ++k) {
    starts[k + 1] = starts[k] + std::max<int64_t>(sizes[k], 0);
  }
  pool->ParallelFor(starts.back(), min_chunk, [&](int64_t begin, int64_t end) {
    // The first range that ends after `begin`.
    size_t k = static_cast<size_t>(
        std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() -
        1);
    for (; k < sizes.size() && starts[k] < end; ++k) {
      const int64_t b = std::max(begin, starts[k]) - starts[k];
      const int64_t e = std::min(end, starts[k + 1]) - starts[k];
      if (e > b) fn(k, b, e);
    }
  });
}

int MachineThreads(int at_most) {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                    std::max(at_most, 1));
}

void ParallelCopy(ThreadPool* pool, void* dst, const void* src, size_t bytes) {
  const int64_t sizes[] = {static_cast<int64_t>(bytes)};
  ParallelForSpans(pool, sizes, kMinBulkPartBytes,
                   [&](size_t, int64_t begin, int64_t end) {
                     std::memcpy(static_cast<char*>(dst) + begin,
                                 static_cast<const char*>(src) + begin,
                                 static_cast<size_t>(end - begin));
                   });
}

}  // namespace psgd
