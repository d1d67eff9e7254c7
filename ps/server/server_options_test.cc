#include "ps/server/server_options.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace ps {
namespace {

bool Names(const absl::Status& s, absl::string_view text) {
  return s.code() == absl::StatusCode::kInvalidArgument &&
         s.message().find(text) != absl::string_view::npos;
}

absl::Status With(void (*change)(ServerOptions&)) {
  ServerOptions o;
  change(o);
  return ValidateServerOptions(o);
}

TEST_CASE("default server options are valid") {
  CHECK(ValidateServerOptions(ServerOptions{}).ok());
}

TEST_CASE("each bad server option is refused naming the field and value") {
  CHECK(Names(With([](ServerOptions& o) { o.listen_address = "nohost"; }),
              "server option listen_address=nohost: expected host:port"));
  CHECK(Names(With([](ServerOptions& o) {
                o.shard.checkpoint.dir = "/tmp/ckpt";
                o.shard.checkpoint.per_host = true;
                o.shard.num_shards = 2;
                o.ps_addresses = {"h0:1"};
              }),
              "server option checkpoint.per_host=true: needs a checkpoint "
              "directory and the addresses of all 2 shards (1 given)"));
  CHECK(With([](ServerOptions& o) {
          o.shard.checkpoint.dir = "/tmp/ckpt";
          o.shard.checkpoint.per_host = true;
          o.shard.num_shards = 2;
          o.ps_addresses = {"h0:1", "h1:1"};
        }).ok());
  // The token's message never shows the token.
  const absl::Status token =
      With([](ServerOptions& o) { o.security.token = "se cret"; });
  CHECK(Names(token, "server option security.token: the token has character"));
  CHECK(token.message().find("se cret") == absl::string_view::npos);
  CHECK(Names(With([](ServerOptions& o) { o.security.peer_token = "peer"; }),
              "server option security.peer_token without a cluster token"));
  CHECK(Names(With([](ServerOptions& o) {
                o.security.tls = true;
                o.security.tls_cert_file = "cert.pem";
              }),
              "TLS needs tls_cert_file and tls_key_file"));
}

TEST_CASE("the shard's options are checked as the shard checks them") {
  CHECK(Names(With([](ServerOptions& o) { o.shard.num_shards = 0; }),
              "server option num_shards=0: must be >= 1"));
  CHECK(Names(With([](ServerOptions& o) { o.shard.staleness_bound = 2; }),
              "staleness_bound=2"));
}

TEST_CASE("the first bad field named is the one checked first") {
  // The shard's workers come before the listen address...
  CHECK(Names(With([](ServerOptions& o) {
                o.listen_address = "nohost";
                o.shard.max_workers = 1;
                o.shard.total_num_replicas = 2;
              }),
              "max_workers=1"));
  // ...the listen address before the rest of the shard's...
  CHECK(Names(With([](ServerOptions& o) {
                o.listen_address = "nohost";
                o.shard.num_shards = 0;
              }),
              "listen_address=nohost"));
  // ...and the shard's before per-host checkpoints and security.
  CHECK(Names(With([](ServerOptions& o) {
                o.shard.max_message_bytes = 1000;
                o.shard.checkpoint.per_host = true;
                o.security.token = "se cret";
              }),
              "max_message_bytes=1000"));
  CHECK(Names(With([](ServerOptions& o) {
                o.shard.checkpoint.per_host = true;
                o.security.token = "se cret";
              }),
              "checkpoint.per_host=true"));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
