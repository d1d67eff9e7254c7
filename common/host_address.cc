#include "common/host_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

// getaddrinfo for host:port, retrying EAI_AGAIN for up to 5 s. The caller
// frees *out.
absl::Status Lookup(absl::string_view host, int port, bool passive,
                    addrinfo** out) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const std::string h(host);
  const std::string p = absl::StrCat(port);
  int rc = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    rc = getaddrinfo(h.empty() ? nullptr : h.c_str(), p.c_str(), &hints, out);
    if (rc != EAI_AGAIN) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (rc != 0) {
    return absl::NotFoundError(absl::StrCat(
        "host '", host, "' does not resolve (", gai_strerror(rc), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SplitHostPortUnbracketed(absl::string_view address,
                                      std::string* host, int* port) {
  RETURN_IF_ERROR(SplitHostPort(address, host, port));
  if (host->size() > 2 && host->front() == '[') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

absl::Status ResolveHost(absl::string_view host) {
  addrinfo* info = nullptr;
  RETURN_IF_ERROR(Lookup(host, 1, /*passive=*/false, &info));
  freeaddrinfo(info);
  return absl::OkStatus();
}

absl::Status CheckCanListen(absl::string_view address) {
  std::string host;
  int port = 0;
  RETURN_IF_ERROR(SplitHostPortUnbracketed(address, &host, &port));
  if (host == "*" || host == "0.0.0.0") host = "0.0.0.0";
  addrinfo* info = nullptr;
  RETURN_IF_ERROR(Lookup(host, port, /*passive=*/true, &info));
  absl::Status result = absl::UnavailableError(
      absl::StrCat("cannot listen on '", address, "': no usable address"));
  for (addrinfo* a = info; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    // As gRPC binds (SO_REUSEADDR, not SO_REUSEPORT: ps/server/grpc_server.cc
    // turns that off), so that a port with a listener is "in use".
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const int rc = bind(fd, a->ai_addr, a->ai_addrlen);
    const int error = errno;
    close(fd);
    if (rc == 0) {
      result = absl::OkStatus();
      break;
    }
    std::string why = std::strerror(error);
    if (error == EADDRINUSE) {
      why = "the address is in use (another process listens there)";
    } else if (error == EADDRNOTAVAIL) {
      why = absl::StrCat("'", host, "' is not an address of this host");
    }
    result = absl::UnavailableError(
        absl::StrCat("cannot listen on '", address, "': ", why));
  }
  freeaddrinfo(info);
  return result;
}

absl::Status CheckPsAddressesResolve(const ClusterConfig& config) {
  for (int i = 0; i < config.ps_size(); ++i) {
    std::string host;
    int port = 0;
    absl::Status s =
        SplitHostPortUnbracketed(config.ps(i).address(), &host, &port);
    if (s.ok()) s = ResolveHost(host);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("ps:", i, " (ps[", i, "].address '",
                                 config.ps(i).address(), "'): ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPsCanListen(const ClusterConfig& config, int index) {
  const config::PsTask& p = config.ps(index);
  absl::Status s = CheckCanListen(ListenAddress(p));
  if (s.ok()) return s;
  return absl::Status(
      s.code(),
      absl::StrCat("ps:", index, " (ps[", index, "].",
                   p.has_listen_address() ? "listen_address" : "address",
                   "): ", s.message()));
}

}  // namespace psgd
