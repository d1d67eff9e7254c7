#include "common/thread_pool.h"

#include <dnnl.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace psgd {
namespace {

// OpenMP's barriers are invisible to ThreadSanitizer; its runtime is tested
// in the other builds.
std::vector<ThreadPool::Runtime> Runtimes() {
#if defined(__SANITIZE_THREAD__)
  return {ThreadPool::Runtime::kOwnThreads};
#else
  return {ThreadPool::Runtime::kOwnThreads, ThreadPool::Runtime::kOpenMp};
#endif
}

// The test links oneDNN, and with it libgomp, as the backend does: in a
// clang build the pool's OpenMP team comes from LLVM's libomp beside it,
// and each chunk must still run once (thread_pool.cc).
TEST_CASE("oneDNN is loaded, as in the backend") {
  CHECK(dnnl_version()->major >= 2);
}

TEST_CASE("ParallelFor covers every index exactly once") {
  for (ThreadPool::Runtime runtime : Runtimes())
    for (int threads : {1, 2, 3, 8}) {
      ThreadPool pool(threads, runtime);
      CHECK(pool.num_threads() == threads);
      for (int64_t n : {0, 1, 2, 7, 1000}) {
        for (int64_t min_chunk : {1, 3, 100}) {
          std::vector<int> hits(n, 0);
          pool.ParallelFor(n, min_chunk, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) ++hits[i];
          });
          for (int64_t i = 0; i < n; ++i) {
            INFO("threads " << threads << " n " << n << " i " << i);
            CHECK(hits[i] == 1);
          }
        }
      }
    }
}

TEST_CASE("chunks respect the minimum size and the thread count") {
  for (ThreadPool::Runtime runtime : Runtimes()) {
    ThreadPool pool(4, runtime);
    std::atomic<int> calls{0};
    std::atomic<int64_t> smallest{100};
    pool.ParallelFor(10, 5, [&](int64_t begin, int64_t end) {
      int64_t size = end - begin;
      int64_t seen = smallest.load();
      while (size < seen && !smallest.compare_exchange_weak(seen, size)) {
      }
      ++calls;
    });
    CHECK(calls == 2);
    CHECK(smallest == 5);
    calls = 0;
    pool.ParallelFor(1000, 1, [&](int64_t, int64_t) { ++calls; });
    CHECK(calls == 4);
  }
}

TEST_CASE("ParallelFor from several threads at once runs them all") {
  for (ThreadPool::Runtime runtime : Runtimes())
    for (int threads : {1, 2, 4}) {
      ThreadPool pool(threads, runtime);
      std::atomic<int64_t> total{0};
      std::vector<std::thread> callers;
      for (int c = 0; c < 4; ++c) {
        callers.emplace_back([&] {
          for (int rep = 0; rep < 50; ++rep) {
            pool.ParallelFor(100, 1, [&](int64_t begin, int64_t end) {
              total += end - begin;
            });
          }
        });
      }
      for (std::thread& t : callers) t.join();
      CHECK(total == 4 * 50 * 100);
    }
}

// A server's concurrent pushes each check and copy their tensors on the
// shard's pool: one that finds the pool's threads busy must not queue
// behind the other's loop (it runs its own on its thread, whole).
TEST_CASE("a loop started while another holds the threads runs alone") {
  ThreadPool pool(2, ThreadPool::Runtime::kOwnThreads);
  Notification first_running, release_first, second_done;
  std::thread first([&] {
    pool.ParallelFor(2, 1, [&](int64_t begin, int64_t) {
      if (begin == 0) {
        first_running.Notify();
        release_first.WaitForNotificationWithDeadline(absl::Now() +
                                                      absl::Seconds(60));
      }
    });
  });
  first_running.WaitForNotification();
  std::vector<std::pair<int64_t, int64_t>> calls;
  std::vector<std::thread::id> threads;
  std::thread second([&] {
    pool.ParallelFor(1000, 1, [&](int64_t begin, int64_t end) {
      calls.push_back({begin, end});
      threads.push_back(std::this_thread::get_id());
    });
    threads.push_back(std::this_thread::get_id());
    second_done.Notify();
  });
  // With the old rule (calls one after the other) the second loop waits
  // for the first, which waits for this notification: never done here.
  const bool done_while_first_held =
      second_done.WaitForNotificationWithDeadline(absl::Now() +
                                                  absl::Seconds(30));
  release_first.Notify();
  first.join();
  second.join();
  CHECK(done_while_first_held);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0] == std::make_pair(int64_t{0}, int64_t{1000}));
  REQUIRE(threads.size() == 2);
  CHECK(threads[0] == threads[1]);
  // The pool still splits a loop once the threads are free again.
  std::atomic<int> parts{0};
  pool.ParallelFor(1000, 1, [&](int64_t, int64_t) { ++parts; });
  CHECK(parts == 2);
}

TEST_CASE("a pool is destroyed cleanly without ever running a loop") {
  for (int threads : {0, 1, 2, 16}) {
    ThreadPool pool(threads);
    CHECK(pool.num_threads() == std::max(threads, 1));
  }
}

TEST_CASE("ParallelForSpans covers every element of every span exactly once") {
  // Empty spans among the others, one span larger than the rest together,
  // and a chunk that cuts spans.
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {5}, {3, 0, 0, 4, 1}, {1000, 2, 0, 7}, {1, 1, 1, 1, 1, 1, 1}};
  for (int threads : {0, 1, 2, 3, 8}) {
    ThreadPool pool(std::max(threads, 1));
    ThreadPool* use = threads == 0 ? nullptr : &pool;
    for (const std::vector<int64_t>& sizes : shapes) {
      for (int64_t min_chunk : {1, 2, 100}) {
        std::vector<std::vector<std::atomic<int>>> hits;
        for (int64_t n : sizes) hits.emplace_back(n);
        std::atomic<int> bad{0};
        ParallelForSpans(use, sizes, min_chunk,
                         [&](size_t k, int64_t begin, int64_t end) {
                           if (k >= sizes.size() || begin < 0 ||
                               end > sizes[k] || begin >= end) {
                             ++bad;
                             return;
                           }
                           for (int64_t i = begin; i < end; ++i) ++hits[k][i];
                         });
        CHECK(bad == 0);
        for (size_t k = 0; k < sizes.size(); ++k) {
          for (int64_t i = 0; i < sizes[k]; ++i) {
            INFO("threads " << threads << " span " << k << " element " << i);
            REQUIRE(hits[k][i] == 1);
          }
        }
      }
    }
  }
}

TEST_CASE("ParallelForSpans splits a large span between the threads") {
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  const std::vector<int64_t> sizes = {10, 1000, 10};
  ParallelForSpans(&pool, sizes, 1, [&](size_t, int64_t, int64_t) { ++calls; });
  // Two parts over 1,020 elements: the first holds span 0 and the first
  // half of span 1, the second the rest of span 1 and span 2.
  CHECK(calls == 4);
}

TEST_CASE("ParallelCopy copies every byte") {
  ThreadPool pool(3);
  // The last is cut in three parts (kMinBulkPartBytes each at least).
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{1000}, size_t{13} << 20}) {
    std::vector<char> src(bytes), dst(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(i * 7 + 1);
    ParallelCopy(&pool, dst.data(), src.data(), bytes);
    CHECK(dst == src);
    std::vector<char> alone(bytes, 0);
    ParallelCopy(nullptr, alone.data(), src.data(), bytes);
    CHECK(alone == src);
  }
}

TEST_CASE("MachineThreads is at least 1 and at most its bound") {
  for (int at_most : {-1, 0, 1, 2, 4, 1024}) {
    const int n = MachineThreads(at_most);
    CHECK(n >= 1);
    CHECK(n <= std::max(at_most, 1));
  }
  CHECK(MachineThreads(1024) ==
        std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace psgd
