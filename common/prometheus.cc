#include "common/prometheus.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "civetweb.h"
#include "common/security.h"

namespace psgd {
namespace {

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // The shortest text that reads back as the same double (0.1, not
  // 0.10000000000000001; counters exact up to 2^53).
  for (int digits = 15; digits < 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(text.c_str(), nullptr) == v) return text;
  }
  return absl::StrFormat("%.17g", v);
}

std::string LabelText(const PrometheusLabels& labels,
                      absl::string_view extra_name = "",
                      absl::string_view extra_value = "") {
  std::string out;
  auto add = [&](absl::string_view k, absl::string_view v) {
    absl::StrAppend(
        &out, out.empty() ? "{" : ",", k, "=\"",
        absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}),
        "\"");
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_name.empty()) add(extra_name, extra_value);
  if (!out.empty()) out += "}";
  return out;
}

}  // namespace

MetricsPage::Family& MetricsPage::FamilyOf(absl::string_view name,
                                           absl::string_view type,
                                           absl::string_view help) {
  auto [it, added] = families_.try_emplace(std::string(name));
  if (added) {
    order_.push_back(std::string(name));
    it->second.type = std::string(type);
    it->second.help = std::string(help);
  }
  return it->second;
}

void MetricsPage::Counter(absl::string_view name, absl::string_view help,
                          double value, const PrometheusLabels& labels) {
  FamilyOf(name, "counter", help)
      .samples.push_back(
          absl::StrCat(name, LabelText(labels), " ", Number(value)));
}

void MetricsPage::Gauge(absl::string_view name, absl::string_view help,
                        double value, const PrometheusLabels& labels) {
  FamilyOf(name, "gauge", help)
      .samples.push_back(
          absl::StrCat(name, LabelText(labels), " ", Number(value)));
}

void MetricsPage::Histogram(absl::string_view name, absl::string_view help,
                            const std::vector<double>& upper_bounds,
                            const std::vector<uint64_t>& cumulative_counts,
                            double sum, uint64_t count,
                            const PrometheusLabels& labels) {
  Family& f = FamilyOf(name, "histogram", help);
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    f.samples.push_back(absl::StrCat(
        name, "_bucket", LabelText(labels, "le", Number(upper_bounds[i])), " ",
        cumulative_counts[i]));
  }
  f.samples.push_back(absl::StrCat(
      name, "_bucket", LabelText(labels, "le", "+Inf"), " ", count));
  f.samples.push_back(
      absl::StrCat(name, "_sum", LabelText(labels), " ", Number(sum)));
  f.samples.push_back(
      absl::StrCat(name, "_count", LabelText(labels), " ", count));
}

std::string MetricsPage::Text() const {
  std::string out;
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    absl::StrAppend(
        &out, "# HELP ", name, " ",
        absl::StrReplaceAll(f.help, {{"\\", "\\\\"}, {"\n", "\\n"}}),
        "\n# TYPE ", name, " ", f.type, "\n");
    for (const std::string& s : f.samples) absl::StrAppend(&out, s, "\n");
  }
  return out;
}

void HistogramData::Observe(double value, uint64_t times) {
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (value <= upper_bounds[i]) counts[i] += times;
  }
  sum += value * static_cast<double>(times);
  count += times;
}

}  // namespace psgd

// civetweb (Debian's build) asks for 100 KB thread stacks, less than the
// static TLS of a process that links cuBLAS and OpenBLAS (the worker: about
// 165 KB), where pthread_create then fails with EINVAL. A floor of 1 MiB on
// every requested stack size, for every library of the process: only a stack
// smaller than that grows (virtual memory; nothing else changes).
extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  using Real = int (*)(pthread_attr_t*, size_t);
  static const Real real =
      reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  constexpr size_t kFloor = size_t{1} << 20;
  return real(attr, size < kFloor ? kFloor : size);
}

namespace psgd {

struct MetricsHttpServer::Context {
  std::function<std::string()> render;
  std::string token;
  mg_context* server = nullptr;
  std::string error;  // civetweb's last log line while starting
};

namespace {

void Reply(mg_connection* conn, int code, absl::string_view reason,
           absl::string_view extra_headers, absl::string_view body) {
  const std::string head = absl::StrCat(
      "HTTP/1.1 ", code, " ", reason,
      "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"
      "\r\nContent-Length: ",
      body.size(), "\r\n", extra_headers, "Connection: close\r\n\r\n");
  mg_write(conn, head.data(), head.size());
  mg_write(conn, body.data(), body.size());
}

int HandleMetrics(mg_connection* conn, void* data) {
  const auto* c = static_cast<const MetricsHttpServer::Context*>(data);
  const mg_request_info* request = mg_get_request_info(conn);
  if (request == nullptr || std::strcmp(request->request_method, "GET") != 0 ||
      std::strcmp(request->local_uri, "/metrics") != 0) {
    Reply(conn, 404, "Not Found", "",
          "not found: GET /metrics serves the metrics\n");
    return 404;
  }
  if (!c->token.empty()) {
    const char* header = mg_get_header(conn, "Authorization");
    absl::string_view presented = header != nullptr ? header : "";
    if (!absl::ConsumePrefix(&presented, "Bearer ") ||
        !ConstantTimeEquals(presented, c->token)) {
      Reply(conn, 401, "Unauthorized",
            "WWW-Authenticate: Bearer realm=\"psgd\"\r\n",
            "missing or wrong cluster token (Authorization: Bearer ...)\n");
      return 401;
    }
  }
  Reply(conn, 200, "OK", "", c->render());
  return 200;
}

int LogMessage(const mg_connection* conn, const char* message) {
  if (const mg_context* ctx = mg_get_context(conn); ctx != nullptr) {
    auto* c = static_cast<MetricsHttpServer::Context*>(mg_get_user_data(ctx));
    if (c != nullptr) c->error = message;
  }
  return 1;  // not on stderr
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::function<std::string()> render,
    std::string token) {
  const std::string where = absl::StrCat(host, ":", port);
  // civetweb takes numeric addresses: resolve a name first.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string bare =
      absl::StartsWith(host, "[") ? host.substr(1, host.size() - 2) : host;
  if (int rc = getaddrinfo(bare.c_str(), std::to_string(port).c_str(), &hints,
                           &found);
      rc != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics port ", where, ": cannot resolve: ", gai_strerror(rc)));
  }
  char numeric[NI_MAXHOST] = "";
  getnameinfo(found->ai_addr, found->ai_addrlen, numeric, sizeof(numeric),
              nullptr, 0, NI_NUMERICHOST);
  const bool v6 = found->ai_family == AF_INET6;
  freeaddrinfo(found);
  // A port in use: civetweb would say so in its log; ask the kernel first
  // for a clear error (the bind below is civetweb's).
  if (port > 0) {
    const int probe = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET6, numeric, &a->sin6_addr);
      len = sizeof(*a);
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      a->sin_family = AF_INET;
      a->sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, numeric, &a->sin_addr);
      len = sizeof(*a);
    }
    const int one = 1;
    setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const bool in_use =
        probe >= 0 &&
        bind(probe, reinterpret_cast<sockaddr*>(&addr), len) != 0 &&
        errno == EADDRINUSE;
    if (probe >= 0) close(probe);
    if (in_use) {
      return absl::FailedPreconditionError(
          absl::StrCat("metrics port ", where, ": already in use"));
    }
  }
  auto context = std::make_unique<Context>();
  context->render = std::move(render);
  context->token = std::move(token);
  const std::string ports = v6 ? absl::StrCat("[", numeric, "]:", port)
                               : absl::StrCat(numeric, ":", port);
  const std::string threads = std::to_string(kThreads);
  const std::string timeout = std::to_string(kTimeoutMs);
  const char* options[] = {"listening_ports",
                           ports.c_str(),
                           "num_threads",
                           threads.c_str(),
                           "request_timeout_ms",
                           timeout.c_str(),
                           "linger_timeout_ms",
                           "0",
                           "enable_keep_alive",
                           "no",
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = LogMessage;
  mg_init_library(0);
  context->server = mg_start(&callbacks, context.get(), options);
  if (context->server == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics port ", where, ": ",
        context->error.empty() ? "cannot listen" : context->error));
  }
  mg_set_request_handler(context->server, "/", HandleMetrics, context.get());
  mg_server_port bound[4] = {};
  const int n = mg_get_server_ports(context->server, 4, bound);
  std::unique_ptr<MetricsHttpServer> s(
      new MetricsHttpServer(std::move(context)));
  s->port_ = n > 0 ? bound[0].port : port;
  return s;
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Context> context)
    : context_(std::move(context)) {}

MetricsHttpServer::~MetricsHttpServer() {
  // Waits for requests in progress, each at most kTimeoutMs.
  if (context_->server != nullptr) mg_stop(context_->server);
}

}  // namespace psgd
