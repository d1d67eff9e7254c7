// The life of a parameter-server shard beside its requests, as a plain C++
// object over a ParameterShard (no gRPC in it): on a thread of its own it
// takes silent workers out of the live set when their lease runs out
// (ParameterShard::ExpireWorkers), logs checkpoint failures, rollbacks,
// sync steps that wait long (ps/server/slow_step.h) and calls refused for a
// missing token, and writes ps-I.jsonl and the TensorBoard scalars every
// metrics_every (ps/server/server_metrics.h); it serves the Prometheus page
// when given a port for it (the server's metrics_port). Stop flushes the
// checkpoints, writes the last line and ps-I.summary.json and logs the
// final counters. PsGrpcServer (ps/server/grpc_server.h) owns one, so
// every served shard, in ps_server or in a test, lives the same way; tests
// run one over a bare shard.
//
// Thread-safety: Stop and the accessors are thread-safe. The loop reads the
// shard and the ServingCounters from its own thread: both must outlive the
// lifecycle (or its Stop).
#ifndef PSGD_PS_SERVER_SERVER_LIFECYCLE_H_
#define PSGD_PS_SERVER_SERVER_LIFECYCLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/prometheus.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

// What the serving layer counts that the shard does not know. The gRPC
// service (ps/server/grpc_service.h) implements it.
class ServingCounters {
 public:
  virtual ~ServingCounters() = default;
  // The run directory the chief sent with Initialize ("" until then).
  virtual std::string run_dir() const = 0;
  // Payload bytes of pulls' replies and of pushes so far.
  virtual int64_t payload_sent_bytes() const = 0;
  virtual int64_t payload_received_bytes() const = 0;
  // Calls refused for a missing or wrong token so far.
  virtual int64_t unauthenticated_calls() const = 0;
  // Fills what the serving layer holds of ShardMemory (pushes_in_flight,
  // push_buffers).
  virtual void AddServingMemory(ShardMemory* memory) const {}
  // Adds the serving layer's totals to the server's summary
  // (ps-I.summary.json).
  virtual void AddSummary(JsonObject* summary) const {}
};

// The lifecycle's own options (the shard's are in ShardOptions: the lease,
// the checkpoints; the metrics port is the server's, MetricsPageOptions).
struct LifecycleOptions {
  // Where ps-I.jsonl goes; empty: the run directory of the ServingCounters
  // (the chief's choice), and no files while there is none.
  std::string run_dir;
  // Where the chief's run directory may lie (its config's run_root, as an
  // absolute path); empty: no run directory is taken from a request.
  std::string run_root;
  // Log which workers a sync step waits for once it has waited this long;
  // zero: never.
  absl::Duration slow_step = absl::Seconds(10);
  // How often the loop runs (lease expiry, logs) and writes a metrics line.
  absl::Duration tick = absl::Milliseconds(100);
  absl::Duration metrics_every = absl::Seconds(2);
};

// The Prometheus page of a served shard (GET /metrics): PsGrpcServer
// fills it from its ServerOptions (metrics_port, the listen address's host,
// the cluster's token).
struct MetricsPageOptions {
  // 0: no page.
  int port = 0;
  // Where it listens (a host name or address, without the port).
  std::string host;
  // When set, the page answers only requests that carry it.
  std::string token;
};

// OK, or INVALID_ARGUMENT naming the first bad field and its value: a
// negative or infinite slow_step, a tick or metrics_every that is not
// positive and finite.
absl::Status ValidateLifecycleOptions(const LifecycleOptions& options);

class ShardLifecycle {
 public:
  // Logs what the shard restored and starts the loop. `counters` may be
  // null (no payload bytes, no run directory but options.run_dir); neither
  // it nor `shard` is owned. INVALID_ARGUMENT for options that
  // ValidateLifecycleOptions refuses; with a page.port,
  // FAILED_PRECONDITION when the Prometheus page cannot listen there (at
  // page.host).
  static absl::StatusOr<std::unique_ptr<ShardLifecycle>> Start(
      ParameterShard* shard, const ServingCounters* counters,
      const LifecycleOptions& options, const MetricsPageOptions& page = {});

  // Stop("the server is stopping") unless stopped.
  ~ShardLifecycle();
  ShardLifecycle(const ShardLifecycle&) = delete;
  ShardLifecycle& operator=(const ShardLifecycle&) = delete;

  // Ends the loop, waits until the checkpoints are on disk, writes the last
  // metrics line and the summary with `reason` and logs the final
  // counters. Call it once the shard takes no more requests (after
  // ParameterShard::Shutdown) for final figures. Idempotent; the
  // Prometheus page answers until destruction.
  void Stop(absl::string_view reason);

  // The port of the Prometheus page; 0 without one.
  int metrics_port() const;

 private:
  ShardLifecycle(ParameterShard* shard, const ServingCounters* counters,
                 const LifecycleOptions& options);

  void Loop();
  // One round of the loop: metrics, logs, lease expiry.
  void Tick(absl::Time now);
  // Logs checkpoint failures and rollbacks not logged yet.
  void LogCheckpoints(const ShardStatus& status);
  // `status` with the serving layer's memory added.
  ShardStatus WithServingMemory(ShardStatus status) const;
  // Writes a metrics line of `status`.
  void WriteMetrics(const ShardStatus& status);

  // Constant after construction.
  ParameterShard* const shard_;            // Not owned.
  const ServingCounters* const counters_;  // Not owned; may be null.
  const LifecycleOptions options_;
  std::unique_ptr<MetricsHttpServer> prometheus_;

  // The loop's state: used by the loop's thread, and by Stop once that
  // thread has ended.
  class State;
  const std::unique_ptr<State> state_;

  Mutex mu_;
  CondVar stop_cv_;  // signalled when stopping_ turns true
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set by the first Stop, which joins the thread.
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_SERVER_LIFECYCLE_H_
