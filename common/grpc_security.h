// The gRPC side of a cluster's security (common/security.h): server and
// channel credentials (TLS or plaintext), the check of every call's token on
// the server, and channels that send the token with every call.
//
// The token travels as call metadata "authorization: Bearer <token>"; the
// server compares it in constant time and refuses a call without it, or
// with another, with UNAUTHENTICATED before the handler runs. Without TLS
// anyone on the path can read the token: it keeps out callers that do not
// know it (another cluster's workers, a stray client, a scanner), not an
// eavesdropper.
//
// Thread-safety: credentials are immutable, CallAuthenticator is
// thread-safe; the functions are pure.
#ifndef PSGD_COMMON_GRPC_SECURITY_H_
#define PSGD_COMMON_GRPC_SECURITY_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/security.h"

namespace psgd {

// The metadata key that carries the token, and the prefix of its value.
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// SslServerCredentials with the certificate chain and key of `options`
// (read now), or InsecureServerCredentials without TLS. Client
// certificates are not requested: the token authenticates clients.
// NOT_FOUND / INTERNAL naming an unreadable file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options);

// What every channel of a client is made with.
struct ClientCredentials {
  std::shared_ptr<grpc::ChannelCredentials> channel =
      grpc::InsecureChannelCredentials();
  // Sent with every call when not empty.
  std::string token;
};

// SslCredentials trusting options.tls_ca_file (read now; empty: the
// system's roots), or plaintext; and the token. NOT_FOUND / INTERNAL naming
// an unreadable file.
absl::StatusOr<ClientCredentials> MakeClientCredentials(
    const SecurityOptions& options);

// Channel arguments for a peer that may be restarted (a ps_server): gRPC's
// reconnect backoff, which by default grows to 2 minutes after a refused
// connection (a health check of a server that is starting saw it unseen
// for 10 s and more), is held at 1 s. Every channel to a ps_server starts
// from these (the workers' calls, their health checks, the servers'
// checkpoint agreement).
grpc::ChannelArguments PeerChannelArguments();

// A channel to `address` with `credentials` and `args`; its calls carry the
// token.
std::shared_ptr<grpc::Channel> CreateChannel(
    const std::string& address, const ClientCredentials& credentials,
    const grpc::ChannelArguments& args);

// What a refused call is told.
inline constexpr absl::string_view kUnauthenticatedMessage =
    "missing or wrong cluster token (every task of a cluster must read the "
    "same token: on several hosts, a token_file or PSGD_TOKEN_FILE on a "
    "shared path; docs/CLUSTER.md, \"Security\")";

// What a call that only servers make (ApplyDecisions) is told without the
// servers' peer token (SecurityOptions::peer_token).
inline constexpr absl::string_view kPeerUnauthenticatedMessage =
    "missing or wrong peer token: only a parameter server may send "
    "decisions, with the servers' peer token (TOKEN_FILE.peer or "
    "--peer_token_file), which workers do not hold (docs/CLUSTER.md, "
    "\"Security\")";

// The server's check of a call's token.
class CallAuthenticator {
 public:
  // An empty token lets every call pass. `refusal` is what a refused call
  // is told.
  explicit CallAuthenticator(
      std::string token, absl::string_view refusal = kUnauthenticatedMessage);

  // OK when the call carries "authorization: Bearer <token>" (or no token
  // is required); UNAUTHENTICATED with `refusal` otherwise. Never says
  // which.
  grpc::Status Check(const grpc::ServerContextBase& context);

  // Calls refused so far.
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  const std::string expected_;  // "Bearer <token>", empty for none
  const std::string refusal_;
  std::atomic<int64_t> refused_{0};
};

}  // namespace psgd

#endif  // PSGD_COMMON_GRPC_SECURITY_H_
