#include "worker/session/server_wait.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "proto/health.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace psgd {

absl::Status WaitForServers(const std::vector<std::string>& addresses,
                            const SecurityOptions& security,
                            absl::Time deadline) {
  using grpc::health::v1::Health;
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;

  ASSIGN_OR_RETURN(ClientCredentials credentials,
                   MakeClientCredentials(security));
  std::vector<std::unique_ptr<Health::Stub>> stubs;
  for (const std::string& a : addresses) {
    stubs.push_back(
        Health::NewStub(CreateChannel(a, credentials, PeerChannelArguments())));
  }
  std::vector<std::string> last_error(addresses.size());
  std::vector<bool> serving(addresses.size(), false);
  absl::Duration backoff = absl::Milliseconds(50);
  bool logged = false;
  for (;;) {
    for (size_t i = 0; i < stubs.size(); ++i) {
      if (serving[i]) continue;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(
          std::min(deadline, absl::Now() + absl::Seconds(2))));
      HealthCheckResponse response;
      grpc::Status s = stubs[i]->Check(&ctx, HealthCheckRequest(), &response);
      if (s.ok() && response.status() == HealthCheckResponse::SERVING) {
        serving[i] = true;
      } else if (s.ok()) {
        last_error[i] = "not serving yet";
      } else {
        last_error[i] = FromGrpcStatus(s).ToString();
      }
    }
    std::vector<std::string> waiting;
    for (size_t i = 0; i < stubs.size(); ++i) {
      if (!serving[i]) {
        waiting.push_back(absl::StrCat(addresses[i], " (", last_error[i], ")"));
      }
    }
    if (waiting.empty()) return absl::OkStatus();
    if (absl::Now() + backoff >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "parameter servers not serving: ", absl::StrJoin(waiting, ", ")));
    }
    if (!logged) {
      spdlog::info("waiting for parameter servers: {}",
                   absl::StrJoin(waiting, ", "));
      logged = true;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

absl::StatusOr<std::string> AwaitRunDir(ps::PsClient* client,
                                        absl::Time deadline) {
  for (;;) {
    absl::StatusOr<std::vector<ps::ShardStatus>> status = client->Status();
    if (!status.ok() && !absl::IsUnavailable(status.status())) {
      return status.status();
    }
    if (status.ok()) {
      for (const ps::ShardStatus& s : *status) {
        if (!s.run_dir.empty()) return s.run_dir;
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          "the servers have no run directory yet: the chief (worker:0) has "
          "not initialised them; pass --run_dir to every task to write "
          "without it");
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

}  // namespace psgd
