// Every option of a ps_server process in one plain struct: the shard's
// (ShardOptions, ps/state/options.h: what ps/shard, ps/state and
// ps/checkpoint read) and what only the server reads: where it listens,
// the metrics port, the port file, the UCX data plane, every shard's
// address (shard 0's decisions, the agreement on per-host checkpoints) and
// the cluster's token and TLS files. Filled by ps_server's flags or by the
// cluster config (ps/server/server_flags.h, ps/server/server_config.h).
// ValidateServerOptions, its one sanitizer, refuses bad values with a
// status naming the field and the value, the shard's fields as
// ValidateShardOptions does.
//
// Thread-safety: plain values.
#ifndef PSGD_PS_SERVER_SERVER_OPTIONS_H_
#define PSGD_PS_SERVER_SERVER_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "ps/state/options.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {

struct ServerOptions {
  // What the shard itself reads (ParameterShard::Create takes it).
  ShardOptions shard;

  // host:port to listen on; port 0 lets the OS choose.
  std::string listen_address = "127.0.0.1:0";
  // Prometheus metrics on HTTP at the listen address's host and this port
  // (GET /metrics; ps/server/server_lifecycle.h); 0: none.
  int metrics_port = 0;
  // When set, the server writes its bound port (a decimal number and a
  // newline) to this file once it listens: for tests and launchers that
  // listen on port 0.
  std::string port_file;
  // The data plane (the config's `wire { data_plane ucx_transports }`,
  // docs/PS.md "Tensors over UCX"): with ucx, the server also listens for
  // pushes and pulls over UCX on ucx_transports (ps/server/ucx_data_plane.h)
  // and tells each worker that joins where, with its key.
  bool ucx = false;
  std::string ucx_transports = "tcp";
  // The element types on the wire (the cluster config's `wire` block,
  // docs/PS.md "Wire dtypes"): pushes must carry gradients of
  // wire.gradients (others are refused with INVALID_ARGUMENT), pulls are
  // answered with weights of wire.weights. The shard stores and computes
  // in float32 and knows nothing of them: the transports' request handler
  // (ps/server/request_handler.h) converts.
  WireDTypes wire;
  // Every shard's address (what the others dial), by shard index: where
  // shard 0 sends its decisions (ps/server/decision_sender.h) and whom the
  // agreement of per-host checkpoints asks
  // (ps/server/checkpoint_agreement.h). May be empty otherwise.
  std::vector<std::string> ps_addresses;
  // Per-host checkpoints (shard.checkpoint.per_host): how long the server
  // waits for every other shard to answer.
  absl::Duration checkpoint_agree_timeout = absl::Minutes(5);
  // The cluster's token and TLS files (common/security.h): the gRPC server
  // takes only calls that carry the token, over TLS when set; the decisions
  // and the agreement go out with them. Default: no token, plaintext.
  SecurityOptions security;
};

// OK, or INVALID_ARGUMENT naming the first bad field and its value
// ("server option listen_address=nohost: expected host:port"): the
// shard's fields as ValidateShardOptions words them, the listen address
// between its two halves, then per-host checkpoints (a directory and every
// shard's address) and the token, the peer token and the TLS files (never
// echoing a token).
absl::Status ValidateServerOptions(const ServerOptions& options);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_SERVER_OPTIONS_H_
