// Host names and listen addresses of a cluster's tasks, checked before
// anything starts, so that a typo or a port in use is an error that names the
// task instead of a server that never answers:
//
//   ps:1 (ps[1].address 'h9:2222'): host 'h9' does not resolve (Name or
//   service not known)
//   ps:0: cannot listen on '0.0.0.0:2222' (ps[0].listen_address): the address
//   is in use (another process listens there)
//
// Thread-safety: free functions; they call getaddrinfo and bind sockets.
#ifndef PSGD_COMMON_HOST_ADDRESS_H_
#define PSGD_COMMON_HOST_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/cluster_config.h"

namespace psgd {

// The host of "host:port" without IPv6 brackets ("[::1]:80" -> "::1").
// INVALID_ARGUMENT as SplitHostPort.
absl::Status SplitHostPortUnbracketed(absl::string_view address,
                                      std::string* host, int* port);

// OK when `host` (a name, an IPv4 address, or an IPv6 address without
// brackets) resolves; NOT_FOUND "host 'H' does not resolve (REASON)"
// otherwise. A temporary failure of the resolver (EAI_AGAIN) is retried for
// a few seconds before it counts.
absl::Status ResolveHost(absl::string_view host);

// OK when this process could listen on `address` (host:port; the wildcard
// hosts "0.0.0.0", "[::]" and "*" included) now: the host resolves to an
// address of this machine and the port is free. UNAVAILABLE naming the
// address and why otherwise (in use, not an address of this host),
// NOT_FOUND when the host does not resolve, INVALID_ARGUMENT when it is not
// host:port.
absl::Status CheckCanListen(absl::string_view address);

// Every ps task's address of `config` resolves (what a worker dials).
// NOT_FOUND naming the first task, its field and its address otherwise.
absl::Status CheckPsAddressesResolve(const ClusterConfig& config);

// ps:`index` of `config` can listen where the config says
// (ListenAddress). The error of CheckCanListen prefixed with the task and
// its field.
absl::Status CheckPsCanListen(const ClusterConfig& config, int index);

}  // namespace psgd

#endif  // PSGD_COMMON_HOST_ADDRESS_H_
