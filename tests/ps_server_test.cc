// The ps_server binary as a process: it listens on a port the OS chooses
// (reported through --port_file), answers health checks, takes only calls
// with the token of --token_file, and exits 0 after a Shutdown RPC, SIGTERM
// or SIGINT; it exits 2 for bad flags. Every wait is bounded.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/security.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"

extern char** environ;

namespace psgd {
namespace {

std::string TestPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");  // set by bazel test
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ServerBinary() {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  REQUIRE(runfiles != nullptr);
  return std::string(runfiles) + "/psgd/ps/ps_server";
}

pid_t Spawn(std::vector<std::string> args) {
  args.insert(args.begin(), ServerBinary());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) ==
          0);
  return pid;
}

// The exit code, or -1 when the process has not exited by the deadline (it
// is then killed).
int WaitForExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Waits for the port file; 0 when it does not appear in time.
int ReadPort(const std::string& path) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return 0;
}

// Cluster "proc"'s default token (common/security.h), made by whichever of
// the test and the server comes first (under this test's XDG_CONFIG_HOME).
std::string ProcToken() {
  absl::StatusOr<DefaultToken> token = ReadOrCreateDefaultToken("proc");
  REQUIRE(token.ok());
  return token->token;
}

// A started server: its pid and a channel to it.
struct Server {
  // `default_token`: the channel carries the cluster's default token
  // (otherwise none: the caller adds what it wants).
  explicit Server(const std::string& name, std::vector<std::string> flags = {},
                  bool default_token = true) {
    const std::string port_file = TestPath(name + ".port");
    std::remove(port_file.c_str());
    flags.insert(flags.end(),
                 {"--listen_address=127.0.0.1:0", "--cluster_name=proc",
                  "--port_file=" + port_file, "--log_level=warn"});
    pid = Spawn(flags);
    const int port = ReadPort(port_file);
    REQUIRE(port > 0);
    if (!default_token) {
      channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                    grpc::InsecureChannelCredentials());
      return;
    }
    // Without --token_file or --insecure the server requires the cluster's
    // default token.
    ClientCredentials credentials;
    credentials.token = ProcToken();
    channel = CreateChannel("127.0.0.1:" + std::to_string(port), credentials,
                            grpc::ChannelArguments());
  }
  bool Serving() {
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    return stub->Check(&ctx, request, &response).ok() &&
           response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  }
  pid_t pid = 0;
  std::shared_ptr<grpc::Channel> channel;
};

TEST_CASE("ps_server exits 0 after a Shutdown RPC") {
  Server server("rpc");
  CHECK(server.Serving());
  auto stub = ps::wire::ParameterServer::NewStub(server.channel);
  ps::wire::ShutdownRequest request;
  ps::wire::ShutdownResponse response;
  {
    // Another cluster's Shutdown is refused.
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    request.set_cluster("other");
    grpc::Status s = stub->Shutdown(&ctx, request, &response);
    CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  request.set_cluster("proc");
  request.set_reason("training is over");
  CHECK(stub->Shutdown(&ctx, request, &response).ok());
  CHECK(WaitForExit(server.pid, absl::Seconds(30)) == 0);
}

TEST_CASE("ps_server exits 0 on SIGTERM and on SIGINT") {
  for (int signal : {SIGTERM, SIGINT}) {
    Server server(signal == SIGTERM ? "term" : "int");
    CHECK(server.Serving());
    REQUIRE(kill(server.pid, signal) == 0);
    CHECK(WaitForExit(server.pid, absl::Seconds(30)) == 0);
  }
}

TEST_CASE("ps_server without a token flag requires the default token") {
  // A caller without the token (another user of this machine) is refused.
  Server server("default", {}, /*default_token=*/false);
  CHECK(server.Serving());
  auto stub = ps::wire::ParameterServer::NewStub(server.channel);
  ps::wire::ShutdownRequest request;
  request.set_cluster("proc");
  ps::wire::ShutdownResponse response;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    CHECK(stub->Shutdown(&ctx, request, &response).error_code() ==
          grpc::StatusCode::UNAUTHENTICATED);
  }
  CHECK(server.Serving());
  // With the default token file's token it is taken.
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  ctx.AddMetadata("authorization", "Bearer " + ProcToken());
  CHECK(stub->Shutdown(&ctx, request, &response).ok());
  CHECK(WaitForExit(server.pid, absl::Seconds(30)) == 0);
}

TEST_CASE("ps_server --insecure takes every call") {
  Server server("insecure", {"--insecure"}, /*default_token=*/false);
  auto stub = ps::wire::ParameterServer::NewStub(server.channel);
  ps::wire::ShutdownRequest request;
  request.set_cluster("proc");
  ps::wire::ShutdownResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  CHECK(stub->Shutdown(&ctx, request, &response).ok());
  CHECK(WaitForExit(server.pid, absl::Seconds(30)) == 0);
}

TEST_CASE("ps_server --token_file takes only calls with the token") {
  const std::string token_file = TestPath("token");
  std::ofstream(token_file) << "proc-token\n";
  chmod(token_file.c_str(), 0600);  // others may not read a token file
  Server server("token", {"--token_file=" + token_file},
                /*default_token=*/false);
  CHECK(server.Serving());  // health checks need no token
  auto stub = ps::wire::ParameterServer::NewStub(server.channel);
  ps::wire::ShutdownRequest request;
  request.set_cluster("proc");
  ps::wire::ShutdownResponse response;
  for (const char* token : {"", "Bearer other", "Bearer proc-token"}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (*token != '\0') ctx.AddMetadata("authorization", token);
    grpc::Status s = stub->Shutdown(&ctx, request, &response);
    INFO(token);
    if (std::string(token) == "Bearer proc-token") {
      CHECK(s.ok());
    } else {
      CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
      CHECK(server.Serving());
    }
  }
  CHECK(WaitForExit(server.pid, absl::Seconds(30)) == 0);
}

TEST_CASE("ps_server --help lists the flags of its library, not only main's") {
  const std::string command = ServerBinary() + " --help 2>&1";
  FILE* out = popen(command.c_str(), "r");
  REQUIRE(out != nullptr);
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), out)) > 0)
    text.append(buffer, n);
  pclose(out);
  INFO(text);
  CHECK(text.find("No flags matched") == std::string::npos);
  // Defined in ps/server/server_flags.cc and common/logging.cc.
  for (const char* flag : {"--num_shards", "--staleness_bound", "--config",
                           "--token_file", "--log_level"}) {
    CHECK(text.find(flag) != std::string::npos);
  }
}

TEST_CASE("ps_server refuses bad flags with exit code 2") {
  pid_t pid = Spawn({"--shard_index=2", "--num_shards=2"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  pid = Spawn({"--mode=semi"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  pid = Spawn({"--token_file=/nonexistent/token"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  pid = Spawn({"--slow_step_seconds=-1"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  pid = Spawn({"--bulk_threads=-1"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  // Bounds the config shares, checked by the same sanitizer.
  pid = Spawn({"--worker_lease_seconds=-1"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  pid = Spawn({"--mode=async", "--staleness_bound=-2"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  // Momentum SGD's rules, as in the config.
  pid = Spawn({"--optimizer=momentum", "--nesterov"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
  pid = Spawn({"--optimizer=momentum", "--momentum=1.5"});
  CHECK(WaitForExit(pid, absl::Seconds(30)) == 2);
}

}  // namespace
}  // namespace psgd
