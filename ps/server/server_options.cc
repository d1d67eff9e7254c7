#include "ps/server/server_options.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {
namespace {

// Where the server listens.
absl::Status ValidateListenAddress(const ServerOptions& o) {
  if (o.listen_address.empty() ||
      o.listen_address.find(':') == std::string::npos) {
    return BadServerOption("listen_address", o.listen_address,
                           "expected host:port");
  }
  return absl::OkStatus();
}

// Per-host checkpoints need a directory and every shard's address.
absl::Status ValidatePerHostCheckpoint(const ServerOptions& o) {
  const ShardOptions& s = o.shard;
  if (s.checkpoint.per_host &&
      (s.checkpoint.dir.empty() ||
       static_cast<int>(o.ps_addresses.size()) != s.num_shards)) {
    return BadServerOption(
        "checkpoint.per_host", "true",
        absl::StrCat("needs a checkpoint directory and the addresses "
                     "of all ",
                     s.num_shards, " shards (", o.ps_addresses.size(),
                     " given)"));
  }
  return absl::OkStatus();
}

// The token, the peer token and TLS files (never echoing a token).
absl::Status ValidateServerSecurity(const ServerOptions& o) {
  if (!o.security.token.empty()) {
    // Never echo the token.
    if (absl::Status s = ValidateToken(o.security.token); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server option security.token: ", s.message()));
    }
  }
  if (!o.security.peer_token.empty()) {
    if (o.security.token.empty()) {
      return absl::InvalidArgumentError(
          "server option security.peer_token without a cluster token");
    }
    if (absl::Status s = ValidateToken(o.security.peer_token); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server option security.peer_token: ", s.message()));
    }
  }
  if (o.security.tls &&
      (o.security.tls_cert_file.empty() || o.security.tls_key_file.empty())) {
    return BadServerOption("security.tls", "true",
                           "TLS needs tls_cert_file and tls_key_file");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateServerOptions(const ServerOptions& o) {
  // The order of the one validator both had before they were split: the
  // first bad field named stays the same.
  RETURN_IF_ERROR(ValidateShardOptionsBeforeIdentity(o.shard));
  RETURN_IF_ERROR(ValidateListenAddress(o));
  RETURN_IF_ERROR(ValidateShardOptionsFromIdentity(o.shard));
  RETURN_IF_ERROR(ValidatePerHostCheckpoint(o));
  RETURN_IF_ERROR(ValidateServerSecurity(o));
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace psgd
