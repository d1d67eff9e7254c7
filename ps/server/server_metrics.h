// What a parameter-server shard writes about itself into the run directory:
// ps-I.jsonl (a "server" line with its step, push counters and payload
// bytes, appended to by a restarted server), the same figures as
// TensorBoard scalars (events.out.tfevents.*.ps-I) and ps-I.summary.json
// when it stops. The lifecycle (ps/server/server_lifecycle.h) calls it.
//
// Thread-safety: ServerMetricsWriter is used by one thread at a time (the
// lifecycle's loop, then Stop after the loop has ended).
#ifndef PSGD_PS_SERVER_SERVER_METRICS_H_
#define PSGD_PS_SERVER_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/event_file.h"
#include "common/metrics.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

// One "server" line of ps-I.jsonl: `task` ("ps:0"), the shard's step and
// counters and `wall_time_s` since the server started.
JsonObject ServerStatusJson(const std::string& task, const ShardStatus& status,
                            double wall_time_s);

class ServerMetricsWriter {
 public:
  // Writes for shard `index`; the clock of wall_time_s starts now.
  explicit ServerMetricsWriter(int index);
  ServerMetricsWriter(const ServerMetricsWriter&) = delete;
  ServerMetricsWriter& operator=(const ServerMetricsWriter&) = delete;

  // Appends a line (and the TensorBoard scalars) for `status`, with the
  // payload bytes since the last line. Opens the files in `run_dir` first
  // (created when missing); does nothing while `run_dir` is empty, nor
  // after it could not be opened (logged once). Write errors are logged.
  void Write(const std::string& run_dir, const ShardStatus& status,
             int64_t sent_bytes, int64_t received_bytes);

  // The summary, once a line has been written: `status` with the
  // stop_reason, in ps-I.summary.json.
  // `add`, when set, adds the serving layer's figures.
  void WriteSummary(const ShardStatus& status, const std::string& reason,
                    const std::function<void(JsonObject*)>& add = nullptr);

 private:
  bool Open(const std::string& run_dir);
  void WriteEvents(const ShardStatus& status);

  const int index_;
  const std::string task_;
  const absl::Time start_;
  std::string dir_;
  std::unique_ptr<MetricsWriter> writer_;
  std::unique_ptr<EventFileWriter> events_;
  int64_t last_sent_ = 0;
  int64_t last_received_ = 0;
  bool failed_ = false;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_SERVER_METRICS_H_
