// How a cluster keeps strangers out (docs/CLUSTER.md, "Security"): a shared
// token that every call to a parameter server must carry, and optionally TLS
// on every connection. Plain values and checks, without gRPC; the gRPC side
// (credentials, the per-call check, channels that send the token) is in
// common/grpc_security.h.
//
// Thread-safety: plain values and pure functions.
#ifndef PSGD_COMMON_SECURITY_H_
#define PSGD_COMMON_SECURITY_H_

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psgd {

struct SecurityOptions {
  // Servers take only calls that carry "authorization: Bearer <token>";
  // clients send it with every call. Empty: no token, which a server
  // (PsGrpcServer::Start) accepts only with `insecure` set.
  std::string token;
  // The servers' own credential, which workers do not hold: a server takes
  // ApplyDecisions (shard 0's decisions, the one call only a server makes)
  // only with "authorization: Bearer <peer_token>", and shard 0 sends it.
  // Resolved by ps_server alone (PeerTokenFileOf), never by a worker's
  // config; empty with a token: the cluster token serves, and any holder
  // of it can send decisions (ps_server says so).
  std::string peer_token;
  // Said in so many words (config `security { insecure: true }`, ps_server
  // --insecure): every call is taken, from anyone who can reach the port.
  bool insecure = false;
  // TLS on every connection when set. Servers present cert_file (a PEM
  // certificate chain) with key_file (its PEM private key); clients trust
  // the authorities in ca_file (PEM; empty: the system's root
  // certificates). Clients need only ca_file, servers only the pair.
  bool tls = false;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
};

// The servers' peer token file beside a cluster token file:
// `token_file` + ".peer" (ps_server's default; made by the first server
// that needs it, as the default token is).
std::string PeerTokenFileOf(absl::string_view token_file);

// The longest token taken (gRPC's metadata fits 8 KiB in all).
inline constexpr size_t kMaxTokenBytes = 1024;

// OK for 1 to kMaxTokenBytes visible ASCII characters (0x21..0x7e: what a
// gRPC metadata value may hold, without the spaces it may trim);
// INVALID_ARGUMENT saying what is wrong otherwise (never the token itself).
absl::Status ValidateToken(absl::string_view token);

// The token in `path`, without trailing whitespace (a final newline), and
// validated, read only from a file nobody but this user (or root: a mounted
// Kubernetes Secret) can have chosen: its directory is owned by this user or
// root and writable by neither group nor others; the file is opened without
// following a link (O_NOFOLLOW), is a regular file of at most 4 KiB (no
// FIFO, no device), owned by this user or root, and unreadable to group
// and others. Every token file goes through it: a config's token_file,
// ps_server --token_file, PSGD_TOKEN_FILE and the default one. NOT_FOUND
// (no such file), FAILED_PRECONDITION naming the file and what is wrong
// (and the fix) for each check above, INVALID_ARGUMENT when it is empty or
// the token is not valid, INTERNAL when a system call fails; each names
// the file.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Where a cluster's token lives when its config names none: the file in
// the environment variable PSGD_TOKEN_FILE when set (launch.sh and the Slurm
// script point it into the job's directory, the Kubernetes manifests at a
// mounted Secret), else $XDG_CONFIG_HOME/psgd/tokens/NAME.token (default
// XDG_CONFIG_HOME: $HOME/.config, HOME from the password database when
// unset). INVALID_ARGUMENT for a cluster name that is not valid
// (common/cluster_name.h); FAILED_PRECONDITION when no home is known.
absl::StatusOr<std::string> DefaultTokenFile(absl::string_view cluster_name);

// The token in `path`, made first when there is no such file: 32 random
// bytes as 64 hex digits, written 0600 to a fresh temporary file (O_EXCL)
// and linked to `path`, so that of several tasks starting at once exactly
// one creates it and every other reads the same whole token. Missing
// directories are made 0700; none is made in a directory that fails
// ReadTokenFile's directory check (FAILED_PRECONDITION). An existing file
// is read, and checked, as ReadTokenFile does, whoever named it.
absl::StatusOr<std::string> ReadOrCreateTokenFile(const std::string& path);

// The cluster's default token: DefaultTokenFile, then ReadOrCreateTokenFile
// (their errors). What a config without a token, and ps_server without
// --token_file, take.
struct DefaultToken {
  std::string file;
  std::string token;
};
absl::StatusOr<DefaultToken> ReadOrCreateDefaultToken(
    absl::string_view cluster_name);

// Where a cluster's token is to come from, as a config's security block or
// ps_server's flags say it. The caller refuses, in its own words, what must
// not go together (token with token_file, insecure with either).
struct TokenSource {
  std::optional<std::string> token;  // the token itself, when given inline
  std::string token_file;            // else the file that holds it
  bool insecure = false;             // else no token at all
};
struct ClusterToken {
  std::string token;  // empty: insecure
  std::string file;   // where it came from; empty: inline or insecure
};

// The cluster's token, the one resolver of the config loader
// (common/cluster_config.h) and ps_server's flags: `source.token` when set
// (ValidateToken's error), else the one in `source.token_file`
// (ReadTokenFile's errors), else none when `source.insecure`, else the
// cluster's default token (ReadOrCreateDefaultToken's errors, after "the
// cluster's default token: ").
absl::StatusOr<ClusterToken> ResolveClusterToken(absl::string_view cluster_name,
                                                 const TokenSource& source);

// Whether `a` equals `b`, in a time that depends on neither their contents
// nor their lengths: it compares SHA-256 digests with CRYPTO_memcmp. For
// comparing a presented secret with the real one.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace psgd

#endif  // PSGD_COMMON_SECURITY_H_
