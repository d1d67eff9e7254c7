#include "ps/server/prometheus_page.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/prometheus.h"

namespace psgd {
namespace ps {

namespace {

// The shard's labels and one more.
PrometheusLabels With(const PrometheusLabels& shard, const char* key,
                      const std::string& value) {
  PrometheusLabels l = shard;
  l.emplace_back(key, value);
  return l;
}

// Pushes by outcome.
void AddPushMetrics(const ShardStatus& s, const PrometheusLabels& shard,
                    MetricsPage& page) {
  const char* kPushes = "psgd_ps_pushes_total";
  const char* kPushesHelp = "Pushes the shard took or refused, by outcome.";
  page.Counter(kPushes, kPushesHelp, s.counters.applied,
               With(shard, "outcome", "applied"));
  page.Counter(kPushes, kPushesHelp, s.counters.aggregated,
               With(shard, "outcome", "aggregated"));
  page.Counter(kPushes, kPushesHelp, s.counters.dropped_stale,
               With(shard, "outcome", "dropped_stale"));
  page.Counter(kPushes, kPushesHelp, s.counters.dropped_surplus,
               With(shard, "outcome", "dropped_surplus"));
  page.Counter(kPushes, kPushesHelp,
               s.counters.refused - s.counters.refused_too_stale,
               With(shard, "outcome", "refused"));
  page.Counter(kPushes, kPushesHelp, s.counters.refused_too_stale,
               With(shard, "outcome", "refused_too_stale"));
}

// The step, the live set, what waits, the generation, lease expiries.
void AddShardGauges(const ShardStatus& s, const PrometheusLabels& shard,
                    MetricsPage& page) {
  page.Gauge("psgd_ps_step", "The shard's step (updates applied).", s.step,
             shard);
  page.Gauge("psgd_ps_live_workers", "Workers in the live set.",
             s.live_workers.size(), shard);
  page.Gauge("psgd_ps_pending_gradients",
             "Sync: gradients gathered for the current step.",
             s.pending_gradients, shard);
  page.Gauge("psgd_ps_pulls_waiting",
             "Pulls held until their step (or staleness bound) comes.",
             s.pulls_waiting, shard);
  page.Gauge("psgd_ps_generation",
             "The cluster's generation (one more per rollback).", s.generation,
             shard);
  page.Counter("psgd_ps_workers_expired_total",
               "Workers taken out of the live set by their lease.",
               s.workers_expired, shard);
}

// The data queue's chunks and epoch (shard 0 when the servers hand out
// the data).
void AddDataQueueMetrics(const ShardStatus& s, const PrometheusLabels& shard,
                         MetricsPage& page) {
  const char* kChunks = "psgd_ps_data_chunks_total";
  const char* kChunksHelp =
      "Data chunks the servers handed out (leased), counted done (their "
      "gradient applied) and put back in the queue (returned).";
  page.Counter(kChunks, kChunksHelp, s.data_counters.leased,
               With(shard, "what", "leased"));
  page.Counter(kChunks, kChunksHelp, s.data_counters.done,
               With(shard, "what", "done"));
  page.Counter(kChunks, kChunksHelp, s.data_counters.returned,
               With(shard, "what", "returned"));
  page.Gauge("psgd_ps_data_epoch", "The data queue's current epoch.",
             s.data_epoch, shard);
  page.Gauge("psgd_ps_data_epoch_done_fraction",
             "Chunks of the current epoch done, over the epoch's chunks.",
             s.data_chunks_per_epoch > 0
                 ? static_cast<double>(s.data_chunks_done) /
                       static_cast<double>(s.data_chunks_per_epoch)
                 : 0.0,
             shard);
}

// Payload bytes, then checkpoints.
void AddTrafficAndCheckpointMetrics(const ShardStatus& s,
                                    const PrometheusLabels& shard,
                                    int64_t sent_bytes, int64_t received_bytes,
                                    MetricsPage& page) {
  page.Counter("psgd_ps_sent_bytes_total",
               "Payload bytes the server sent (pulled weights, replies).",
               sent_bytes, shard);
  page.Counter("psgd_ps_received_bytes_total",
               "Payload bytes the server received (pushed gradients, "
               "requests).",
               received_bytes, shard);
  page.Counter("psgd_ps_checkpoints_written_total", "Checkpoints written.",
               s.checkpoints_written, shard);
  page.Counter("psgd_ps_checkpoint_failures_total", "Checkpoints that failed.",
               s.checkpoint_failures, shard);
  page.Gauge("psgd_ps_checkpoint_last_complete_step",
             "The label of the newest checkpoint complete for every shard "
             "(-1: none yet).",
             s.last_complete_checkpoint_label, shard);
}

// Async staleness controls (docs/PS.md, "Async mode"): SSP, DC-ASGD and
// the staleness histogram.
void AddAsyncMetrics(const ShardStatus& s, const PrometheusLabels& shard,
                     MetricsPage& page) {
  page.Counter("psgd_ps_ssp_blocked_pulls_total",
               "Async: pulls the staleness bound held back.",
               s.ssp_blocked_pulls, shard);
  page.Counter("psgd_ps_ssp_blocked_seconds_total",
               "Async: time pulls were held back by the staleness bound.",
               s.ssp_blocked_seconds, shard);
  const char* kDc = "psgd_ps_dc_asgd_pushes_total";
  const char* kDcHelp =
      "Async: pushes with DC-ASGD on, by whether they were compensated.";
  page.Counter(kDc, kDcHelp, s.dc_compensated,
               With(shard, "compensated", "true"));
  page.Counter(kDc, kDcHelp, s.dc_uncompensated,
               With(shard, "compensated", "false"));
  // Async staleness: the histogram the shard keeps, in power-of-two buckets.
  HistogramData h({0, 1, 2, 4, 8, 16, 32, 64});
  for (const auto& [staleness, count] : s.staleness_histogram) {
    h.Observe(static_cast<double>(staleness), static_cast<uint64_t>(count));
  }
  page.Histogram("psgd_ps_staleness",
                 "Async: staleness of the applied pushes (steps).",
                 h.upper_bounds, h.counts, h.sum, h.count, shard);
}

}  // namespace

std::string ShardMetricsText(const ShardStatus& s, int64_t sent_bytes,
                             int64_t received_bytes) {
  MetricsPage page;
  const PrometheusLabels shard = {{"shard", absl::StrCat(s.shard_index)}};
  AddPushMetrics(s, shard, page);
  AddShardGauges(s, shard, page);
  if (s.data_queue) AddDataQueueMetrics(s, shard, page);
  AddTrafficAndCheckpointMetrics(s, shard, sent_bytes, received_bytes, page);
  AddAsyncMetrics(s, shard, page);
  return page.Text();
}

}  // namespace ps
}  // namespace psgd
