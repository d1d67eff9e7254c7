// Prometheus' text exposition format (version 0.0.4), built by hand: a page
// of metric families (counters, gauges, histograms), each with its # HELP
// and # TYPE lines once, then its samples. MetricsHttpServer serves such a
// page on GET /metrics: civetweb (Debian's libcivetweb, the embedded server
// prometheus-cpp uses) with a pool of threads larger than a set of slow
// clients takes and short read and write timeouts, so that no client can
// hold it (or the shutdown) for longer than a timeout; with a token, only to
// requests that carry "Authorization: Bearer <token>" (what Prometheus' scrape
// config sends with `authorization: {credentials_file: ...}`), others get 401.
//
// Thread-safety: MetricsPage is a plain value. MetricsHttpServer calls
// `render` from its threads, possibly at once; `render` must be thread-safe.
#ifndef PSGD_COMMON_PROMETHEUS_H_
#define PSGD_COMMON_PROMETHEUS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psgd {

using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

class MetricsPage {
 public:
  // `name` in [a-zA-Z_:][a-zA-Z0-9_:]*; a counter's ends in _total.
  void Counter(absl::string_view name, absl::string_view help, double value,
               const PrometheusLabels& labels = {});
  void Gauge(absl::string_view name, absl::string_view help, double value,
             const PrometheusLabels& labels = {});
  // Cumulative: counts[i] observations <= upper_bounds[i] (ascending, the
  // +Inf bucket added here with `count`).
  void Histogram(absl::string_view name, absl::string_view help,
                 const std::vector<double>& upper_bounds,
                 const std::vector<uint64_t>& cumulative_counts, double sum,
                 uint64_t count, const PrometheusLabels& labels = {});

  std::string Text() const;

 private:
  struct Family {
    std::string type, help;
    std::vector<std::string> samples;
  };
  Family& FamilyOf(absl::string_view name, absl::string_view type,
                   absl::string_view help);
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

// A histogram with fixed bucket bounds that observations are added to.
struct HistogramData {
  explicit HistogramData(std::vector<double> bounds)
      : upper_bounds(std::move(bounds)), counts(upper_bounds.size(), 0) {}
  // `times` observations of `value`.
  void Observe(double value, uint64_t times = 1);
  std::vector<double> upper_bounds;
  std::vector<uint64_t> counts;  // cumulative
  double sum = 0.0;
  uint64_t count = 0;
};

class MetricsHttpServer {
 public:
  // A request's longest read or write before the server drops it: a
  // scrape sends its few header lines at once.
  static constexpr int kTimeoutMs = 2000;
  // Requests served at once: enough that slow clients (40 sending a header
  // line a second kept a scrape waiting 12 s with 2) leave threads free;
  // each idle one is a sleeping thread.
  static constexpr int kThreads = 64;

  // Listens on `host`:`port` (an IP address or a name that resolves; port
  // 0: the OS chooses). `token` empty: every GET /metrics is answered.
  // FAILED_PRECONDITION naming the address when it is in use or cannot be
  // bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::function<std::string()> render,
      std::string token = "");
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

  // What the request handler reads (prometheus.cc).
  struct Context;

 private:
  explicit MetricsHttpServer(std::unique_ptr<Context> context);

  std::unique_ptr<Context> context_;
  int port_ = 0;
};

}  // namespace psgd

#endif  // PSGD_COMMON_PROMETHEUS_H_
