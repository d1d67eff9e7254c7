#include "tests/fuzz/shard_picture.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_join.h"

namespace psgd {
namespace fuzz {
namespace {

std::vector<float> Copy(absl::Span<const float> s) {
  return std::vector<float>(s.begin(), s.end());
}

// Bitwise, so that NaNs compare equal to themselves.
bool SameBits(const std::vector<std::vector<float>>& a,
              const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    if (!a[i].empty() && std::memcmp(a[i].data(), b[i].data(),
                                     a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

// Index of the first non-finite value in `tensors` as "tensor i element j",
// or empty.
std::string FirstNonFinite(const std::vector<std::vector<float>>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (size_t j = 0; j < tensors[i].size(); ++j) {
      if (!std::isfinite(tensors[i][j])) {
        return absl::StrCat("variable ", i, " element ", j, " is ",
                            tensors[i][j]);
      }
    }
  }
  return "";
}

bool SameCountersButRefused(const ps::PushCounters& a,
                            const ps::PushCounters& b) {
  return a.aggregated == b.aggregated && a.applied == b.applied &&
         a.dropped_stale == b.dropped_stale &&
         a.dropped_surplus == b.dropped_surplus &&
         a.completed_by_leave == b.completed_by_leave;
}

}  // namespace

void Fail(absl::string_view condition, absl::string_view message) {
  std::fprintf(stderr, "shard fuzz: %.*s: %.*s\n",
               static_cast<int>(condition.size()), condition.data(),
               static_cast<int>(message.size()), message.data());
  std::abort();
}

ShardPicture ShardPicture::Of(ps::ParameterShard& shard) {
  ShardPicture p;
  p.status = shard.Status();
  // A pull with no worker and no minimum answers at once when the shard is
  // initialised and open; otherwise it waits and is withdrawn at once.
  const uint64_t ticket = shard.PullAsync(
      0, -1, [&p](absl::StatusOr<ps::ParameterShard::Snapshot> s) {
        if (s.ok()) p.snapshot = *std::move(s);
      });
  if (ticket != 0) shard.CancelPull(ticket);
  if (p.snapshot != nullptr) {
    for (const Tensor& w : p.snapshot->weights)
      p.weights.push_back(Copy(w.span()));
    for (int i = 0; i < p.snapshot->layout->size(); ++i) {
      p.m.push_back(shard.CopySlot("m", i));
      p.v.push_back(shard.CopySlot("v", i));
    }
  }
  return p;
}

void ExpectSameWeights(const ShardPicture& a, const ShardPicture& b,
                       absl::string_view what) {
  FUZZ_EXPECT(SameBits(a.weights, b.weights), what, ": weights differ");
  FUZZ_EXPECT(SameBits(a.m, b.m) && SameBits(a.v, b.v), what,
              ": optimizer slots differ");
}

void ExpectSameState(const ShardPicture& a, const ShardPicture& b,
                     absl::string_view what, bool data) {
  const ps::ShardStatus& x = a.status;
  const ps::ShardStatus& y = b.status;
  FUZZ_EXPECT(x.initialized == y.initialized, what);
  FUZZ_EXPECT(x.step == y.step, what, ": step ", x.step, " -> ", y.step);
  FUZZ_EXPECT(x.shutting_down == y.shutting_down, what);
  FUZZ_EXPECT(x.live_workers == y.live_workers, what, ": live workers [",
              absl::StrJoin(x.live_workers, ","), "] -> [",
              absl::StrJoin(y.live_workers, ","), "]");
  FUZZ_EXPECT(x.pending_gradients == y.pending_gradients, what,
              ": pending gradients ", x.pending_gradients, " -> ",
              y.pending_gradients);
  FUZZ_EXPECT(SameCountersButRefused(x.counters, y.counters), what);
  FUZZ_EXPECT(x.staleness_histogram == y.staleness_histogram, what);
  FUZZ_EXPECT(x.workers_expired == y.workers_expired, what);
  FUZZ_EXPECT(x.num_parameters == y.num_parameters, what);
  FUZZ_EXPECT(x.generation == y.generation, what, ": generation ", x.generation,
              " -> ", y.generation);
  FUZZ_EXPECT(x.awaiting_rollback == y.awaiting_rollback, what);
  FUZZ_EXPECT(x.rollbacks == y.rollbacks, what, ": a rollback recorded");
  if (data) {
    FUZZ_EXPECT(x.data_queue == y.data_queue && x.data_epoch == y.data_epoch &&
                    x.data_chunks_done == y.data_chunks_done &&
                    x.data_chunks_out == y.data_chunks_out &&
                    x.data_chunks_queued == y.data_chunks_queued &&
                    x.data_counters.leased == y.data_counters.leased &&
                    x.data_counters.done == y.data_counters.done &&
                    x.data_counters.returned == y.data_counters.returned &&
                    x.data_counters.epochs_completed ==
                        y.data_counters.epochs_completed,
                what, ": the data queue moved (leased ", x.data_counters.leased,
                " -> ", y.data_counters.leased, ", out ", x.data_chunks_out,
                " -> ", y.data_chunks_out, ", queued ", x.data_chunks_queued,
                " -> ", y.data_chunks_queued, ")");
  }
  // After Shutdown the weights are out of sight (no pull answers).
  if (a.snapshot != nullptr && b.snapshot != nullptr) {
    FUZZ_EXPECT(a.snapshot == b.snapshot, what, ": new weights published");
    FUZZ_EXPECT(SameBits(a.weights, b.weights), what, ": weights changed");
    FUZZ_EXPECT(SameBits(a.m, b.m) && SameBits(a.v, b.v), what,
                ": optimizer slots changed");
  }
}

void ExpectConsistent(const ShardPicture& p, const ps::ShardOptions& options) {
  const ps::ShardStatus& s = p.status;
  const ps::PushCounters& c = s.counters;
  FUZZ_EXPECT(s.step >= 0, s.step);
  FUZZ_EXPECT(c.refused >= c.refused_too_stale && c.refused_too_stale >= 0,
              c.refused, " ", c.refused_too_stale);
  FUZZ_EXPECT(
      std::is_sorted(s.live_workers.begin(), s.live_workers.end()) &&
          std::adjacent_find(s.live_workers.begin(), s.live_workers.end()) ==
              s.live_workers.end(),
      absl::StrJoin(s.live_workers, ","));
  for (int w : s.live_workers) {
    FUZZ_EXPECT(w >= 0 && w < options.total_num_replicas, w);
  }
  if (!s.initialized) {
    FUZZ_EXPECT(s.step == 0 && s.pending_gradients == 0 &&
                    s.num_parameters == 0 && c.applied == 0 &&
                    c.aggregated == 0,
                "an uninitialised shard at step ", s.step);
  }
  if (options.mode == ps::Mode::kSync) {
    // Every step was completed by one push or one leave.
    FUZZ_EXPECT(s.step == c.applied + c.completed_by_leave, "step ", s.step,
                " applied ", c.applied, " by leave ", c.completed_by_leave);
    const int live = static_cast<int>(s.live_workers.size());
    const int required =
        std::max(1, std::min(options.replicas_to_aggregate, live));
    FUZZ_EXPECT(s.pending_gradients < required, s.pending_gradients,
                " gradients pending, a step needs ", required);
    FUZZ_EXPECT(s.staleness_histogram.empty(), "sync staleness");
  } else {
    FUZZ_EXPECT(s.step == c.applied, "step ", s.step, " applied ", c.applied);
    // The one drop in async mode: a push computed from a data chunk its
    // worker no longer holds (ps/shard/shard.h, Push).
    FUZZ_EXPECT(s.pending_gradients == 0 && c.aggregated == 0 &&
                    (c.dropped_stale == 0 || options.data_queue_on) &&
                    c.dropped_surplus == 0 && c.completed_by_leave == 0,
                "sync outcomes in async mode");
    int64_t histogram = 0;
    for (const auto& [staleness, count] : s.staleness_histogram) {
      FUZZ_EXPECT(staleness >= 0 && count > 0, staleness, " ", count);
      histogram += count;
    }
    FUZZ_EXPECT(histogram == c.applied, histogram, " ", c.applied);
  }
  if (p.snapshot != nullptr) {
    FUZZ_EXPECT(p.snapshot->step == s.step, "snapshot of step ",
                p.snapshot->step, " at step ", s.step);
    int64_t parameters = 0;
    for (const auto& w : p.weights)
      parameters += static_cast<int64_t>(w.size());
    FUZZ_EXPECT(parameters == s.num_parameters, parameters, " ",
                s.num_parameters);
    std::string bad = FirstNonFinite(p.weights);
    FUZZ_EXPECT(bad.empty(), "weights at step ", s.step, ": ", bad);
    bad = FirstNonFinite(p.m);
    if (bad.empty()) bad = FirstNonFinite(p.v);
    FUZZ_EXPECT(bad.empty(), "optimizer slots at step ", s.step, ": ", bad);
  }
}

}  // namespace fuzz
}  // namespace psgd
