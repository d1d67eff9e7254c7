#include "python/model_check.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"

namespace psgd {
namespace {

absl::Status Mismatch(std::string message) {
  absl::Status s = absl::FailedPreconditionError(std::move(message));
  s.SetPayload(kModelMismatchPayload, absl::Cord("1"));
  return s;
}

const VariableSpec* Find(const std::vector<VariableSpec>& specs,
                         const std::string& name) {
  for (const VariableSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// "w/part_3" -> ("w", 3); a name without the suffix -> (name, -1).
std::pair<std::string, int> SplitPart(const std::string& name) {
  const size_t at = name.rfind("/part_");
  int part = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(name).substr(at + 6), &part)) {
    return {name, -1};
  }
  return {name.substr(0, at), part};
}

absl::Status AwaitInitialized(ps::PsClient* client, absl::Time deadline) {
  for (;;) {
    absl::StatusOr<std::vector<ps::ShardStatus>> status = client->Status();
    if (!status.ok() && !absl::IsUnavailable(status.status())) {
      return status.status();
    }
    bool all = status.ok();
    if (status.ok()) {
      for (const ps::ShardStatus& s : *status) all = all && s.initialized;
    }
    if (all) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          "the servers were not initialised by the chief in time");
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

}  // namespace

absl::Status CompareVariables(const std::vector<VariableSpec>& mine,
                              const std::vector<VariableSpec>& theirs,
                              absl::string_view mine_is,
                              absl::string_view theirs_are) {
  for (const VariableSpec& v : mine) {
    const VariableSpec* t = Find(theirs, v.name);
    if (t == nullptr) {
      return Mismatch(absl::StrCat(mine_is, "'s variable '", v.name,
                                   "' (shape ", ShapeToString(v.shape),
                                   ") is not among ", theirs_are,
                                   " variables"));
    }
    if (t->shape != v.shape) {
      return Mismatch(absl::StrCat(
          mine_is, "'s variable '", v.name, "' has shape ",
          ShapeToString(v.shape), " but ", theirs_are, " has shape ",
          ShapeToString(t->shape)));
    }
  }
  for (const VariableSpec& t : theirs) {
    if (Find(mine, t.name) == nullptr) {
      return Mismatch(absl::StrCat(mine_is, " lacks variable '", t.name,
                                   "' (shape ", ShapeToString(t.shape),
                                   ") of ", theirs_are, " variables"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<VariableSpec>> ServerVariables(
    ps::PsClient* client, const ps::GrpcClientOptions& options,
    absl::Time deadline) {
  RETURN_IF_ERROR(AwaitInitialized(client, deadline));
  ASSIGN_OR_RETURN(ClientCredentials credentials,
                   MakeClientCredentials(options.security));
  // name -> part -> slice shape; names in the order first seen.
  std::map<std::string, std::map<int, Shape>> parts;
  std::vector<std::string> order;
  for (const std::string& address : options.addresses) {
    std::unique_ptr<ps::wire::ParameterServer::Stub> stub =
        ps::wire::ParameterServer::NewStub(ps::CreatePsChannel(
            address, options.max_message_bytes, credentials));
    ps::wire::PullRequest request;
    request.set_cluster(options.cluster);
    request.set_worker_id(-1);
    ps::wire::PullResponse response;
    for (;;) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(deadline));
      const absl::Status pulled =
          FromGrpcStatus(stub->Pull(&context, request, &response));
      // A server that restored a checkpoint answers ABORTED until a worker
      // rolls the cluster back to it (the chief, or another worker, as its
      // session starts): not this worker's failure; ask again.
      if (absl::IsAborted(pulled) && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(50));
        continue;
      }
      RETURN_IF_ERROR(Annotate(pulled, absl::StrCat("reading the servers' "
                                                    "variables from ",
                                                    address, ": ")));
      break;
    }
    for (const ps::wire::TensorData& t : response.variables()) {
      auto [name, part] = SplitPart(t.name());
      if (parts.find(name) == parts.end()) order.push_back(name);
      parts[name][part] = Shape(t.shape().begin(), t.shape().end());
    }
  }
  std::vector<VariableSpec> variables;
  for (const std::string& name : order) {
    const std::map<int, Shape>& slices = parts[name];
    Shape shape = slices.begin()->second;
    if (slices.begin()->first >= 0 && !shape.empty()) {
      shape[0] = 0;
      for (const auto& [part, s] : slices) shape[0] += s.empty() ? 0 : s[0];
    }
    variables.push_back({name, std::move(shape), Initializer()});
  }
  return variables;
}

}  // namespace psgd
