#include "ps/server/server_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace psgd {
namespace ps {

JsonObject ServerStatusJson(const std::string& task, const ShardStatus& s,
                            double wall_time_s) {
  JsonObject j;
  j.Set("kind", "server")
      .Set("task", task)
      .Set("wall_time_s", wall_time_s)
      .Set("unix_time", absl::ToUnixMicros(absl::Now()) / 1e6)
      .Set("step", s.step)
      .Set("aggregated", s.counters.aggregated)
      .Set("applied", s.counters.applied)
      .Set("dropped_stale", s.counters.dropped_stale)
      .Set("dropped_surplus", s.counters.dropped_surplus)
      .Set("refused", s.counters.refused)
      .Set("refused_too_stale", s.counters.refused_too_stale)
      .Set("completed_by_leave", s.counters.completed_by_leave)
      .Set("ssp_blocked_pulls", s.ssp_blocked_pulls)
      .Set("ssp_blocked_s", s.ssp_blocked_seconds)
      .Set("dc_compensated", s.dc_compensated)
      .Set("dc_uncompensated", s.dc_uncompensated)
      .Set("live_workers", static_cast<int64_t>(s.live_workers.size()))
      .Set("workers_expired", s.workers_expired)
      .Set("data_epoch", s.data_epoch)
      .Set("data_chunks_done", s.data_chunks_done)
      .Set("data_epochs_completed", s.data_counters.epochs_completed)
      .Set("data_returned", s.data_counters.returned)
      .Set("pending_gradients", s.pending_gradients)
      .Set("pulls_waiting", s.pulls_waiting)
      .Set("generation", s.generation)
      .Set("restored_label", s.restored_label)
      .Set("rollbacks", static_cast<int64_t>(s.rollbacks.size()))
      .Set("checkpoints_written", s.checkpoints_written)
      .Set("checkpoint_failures", s.checkpoint_failures)
      .Set("last_checkpoint_label", s.last_checkpoint_label)
      .Set("last_complete_checkpoint_label", s.last_complete_checkpoint_label)
      // Memory (docs/PS.md, "Memory"): the shard's items and the process's.
      .Set("memory_weights", s.memory.weights)
      .Set("memory_weight_versions", s.memory.weight_versions)
      .Set("memory_optimizer_slots", s.memory.optimizer_slots)
      .Set("memory_aggregate", s.memory.aggregate)
      .Set("memory_staged_parts", s.memory.staged_parts)
      .Set("memory_compensation", s.memory.compensation)
      .Set("memory_pushes_in_flight", s.memory.pushes_in_flight)
      .Set("memory_push_buffers", s.memory.push_buffers)
      .Set("memory_total", s.memory.Total())
      .Set("resident_bytes", ResidentMemoryBytes());
  std::string hist;
  for (const auto& [staleness, count] : s.staleness_histogram) {
    absl::StrAppend(&hist, hist.empty() ? "" : ",", staleness, ":", count);
  }
  j.Set("staleness_histogram", hist);
  return j;
}

ServerMetricsWriter::ServerMetricsWriter(int index)
    : index_(index), task_(absl::StrCat("ps:", index)), start_(absl::Now()) {}

void ServerMetricsWriter::Write(const std::string& run_dir,
                                const ShardStatus& status, int64_t sent,
                                int64_t received) {
  if (writer_ == nullptr && !Open(run_dir)) return;
  JsonObject line = ServerStatusJson(
      task_, status, absl::ToDoubleSeconds(absl::Now() - start_));
  // Payload bytes since the last line (per-task network figures).
  line.Set("sent_bytes", sent - last_sent_)
      .Set("received_bytes", received - last_received_);
  last_sent_ = sent;
  last_received_ = received;
  absl::Status s = writer_->Write(line);
  if (!s.ok()) spdlog::warn("{}", s.ToString());
  if (events_ != nullptr) WriteEvents(status);
}

void ServerMetricsWriter::WriteSummary(
    const ShardStatus& status, const std::string& reason,
    const std::function<void(JsonObject*)>& add) {
  if (writer_ == nullptr) return;
  JsonObject summary = ServerStatusJson(
      task_, status, absl::ToDoubleSeconds(absl::Now() - start_));
  summary.Set("kind", "server_summary").Set("stop_reason", reason);
  if (add != nullptr) add(&summary);
  absl::Status s = WriteJsonFile(
      absl::StrCat(dir_, "/ps-", index_, ".summary.json"), summary);
  if (!s.ok()) spdlog::warn("{}", s.ToString());
}

// The same figures as TensorBoard scalars, at the shard's step.
void ServerMetricsWriter::WriteEvents(const ShardStatus& st) {
  const double now = absl::ToUnixMicros(absl::Now()) / 1e6;
  const std::string p = absl::StrCat("ps", index_, "/");
  const std::pair<const char*, double> scalars[] = {
      {"pushes_applied", static_cast<double>(st.counters.applied)},
      {"pushes_aggregated", static_cast<double>(st.counters.aggregated)},
      {"pushes_dropped_stale", static_cast<double>(st.counters.dropped_stale)},
      {"pushes_dropped_surplus",
       static_cast<double>(st.counters.dropped_surplus)},
      {"pushes_refused", static_cast<double>(st.counters.refused)},
      {"live_workers", static_cast<double>(st.live_workers.size())},
      {"pending_gradients", static_cast<double>(st.pending_gradients)},
  };
  absl::Status s;
  for (const auto& [tag, value] : scalars) {
    s.Update(events_->WriteScalar(p + tag, st.step, value, now));
  }
  int64_t pushes = 0, total = 0;
  for (const auto& [staleness, count] : st.staleness_histogram) {
    pushes += count;
    total += staleness * count;
  }
  if (pushes > 0) {
    s.Update(events_->WriteScalar(p + "staleness_mean", st.step,
                                  static_cast<double>(total) / pushes, now));
  }
  s.Update(events_->Flush());
  if (!s.ok()) spdlog::warn("{}", s.ToString());
}

bool ServerMetricsWriter::Open(const std::string& run_dir) {
  if (failed_ || run_dir.empty()) return false;
  absl::StatusOr<std::string> made = CreateRunDir(run_dir, "", "", absl::Now());
  absl::StatusOr<std::unique_ptr<MetricsWriter>> w =
      made.ok()
          ? MetricsWriter::Open(absl::StrCat(*made, "/ps-", index_, ".jsonl"),
                                /*append=*/true)
          : absl::StatusOr<std::unique_ptr<MetricsWriter>>(made.status());
  if (!w.ok()) {
    spdlog::warn("no metrics: {}", w.status().ToString());
    failed_ = true;
    return false;
  }
  dir_ = *made;
  writer_ = *std::move(w);
  spdlog::info("writing metrics to {}", writer_->path());
  absl::StatusOr<std::unique_ptr<EventFileWriter>> events =
      EventFileWriter::Create(dir_, absl::StrCat("ps-", index_));
  if (events.ok()) {
    events_ = *std::move(events);
  } else {
    spdlog::warn("no TensorBoard events: {}", events.status().ToString());
  }
  return true;
}

}  // namespace ps
}  // namespace psgd
