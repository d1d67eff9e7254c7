#include "common/prometheus.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
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

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::function<std::string()> render) {
  const std::string where = absl::StrCat(host, ":", port);
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
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics port ", where, ": socket: ", std::strerror(errno)));
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 16) != 0) {
    const int e = errno;
    freeaddrinfo(found);
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("metrics port ", where, ": ",
                     e == EADDRINUSE ? "already in use" : std::strerror(e)));
  }
  freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int actual =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, actual, std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int fd, int port,
                                     std::function<std::string()> render)
    : fd_(fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

void MetricsHttpServer::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    Answer(client);
    close(client);
  }
}

void MetricsHttpServer::Answer(int client) {
  // The request line is enough: GET /metrics HTTP/1.x. Read until the
  // headers end (or 8 KiB, or 2 s).
  std::string request;
  char buffer[1024];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.size() < 8192) {
    pollfd p{client, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) return;
    const ssize_t n = read(client, buffer, sizeof(buffer));
    if (n <= 0) break;
    request.append(buffer, static_cast<size_t>(n));
  }
  const bool metrics = absl::StartsWith(request, "GET /metrics ") ||
                       absl::StartsWith(request, "GET /metrics?");
  const std::string body =
      metrics ? render_() : "not found: GET /metrics serves the metrics\n";
  const std::string response =
      absl::StrCat("HTTP/1.1 ", metrics ? "200 OK" : "404 Not Found",
                   "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"
                   "\r\nContent-Length: ",
                   body.size(), "\r\nConnection: close\r\n\r\n", body);
  size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n = send(client, response.data() + sent,
                           response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace psgd
