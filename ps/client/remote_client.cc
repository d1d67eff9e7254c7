#include "ps/client/remote_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/host_address.h"
#include "common/status_macros.h"
#include "ps/client/grpc_channel.h"
#include "ps/client/ucx_channel.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view value,
                 absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("grpc client: ", field, "=", value, ": ", why));
}

}  // namespace

absl::Status CheckRemoteClientOptions(const RemoteClientOptions& o) {
  if (o.addresses.empty()) {
    return absl::InvalidArgumentError("grpc client: no server addresses");
  }
  for (size_t i = 0; i < o.addresses.size(); ++i) {
    if (o.addresses[i].empty()) {
      return Bad(absl::StrCat("addresses[", i, "]"), "''", "is empty");
    }
  }
  if (o.max_message_bytes < RemoteClientOptions::kMinMessageBytes ||
      o.max_message_bytes > RemoteClientOptions::kMaxMessageBytes) {
    return Bad(
        "max_message_bytes", absl::StrCat(o.max_message_bytes),
        absl::StrCat("must be in [", RemoteClientOptions::kMinMessageBytes,
                     ", ", RemoteClientOptions::kMaxMessageBytes, "]"));
  }
  if (o.rpc_timeout <= absl::ZeroDuration()) {
    return Bad("rpc_timeout", absl::FormatDuration(o.rpc_timeout),
               "must be > 0");
  }
  if (o.worker_id < -1) {
    return Bad("worker_id", absl::StrCat(o.worker_id),
               "must be >= 0, or -1 for no worker");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RemotePsClient>> RemotePsClient::Create(
    RemoteClientOptions options) {
  RETURN_IF_ERROR(CheckRemoteClientOptions(options));
  ASSIGN_OR_RETURN(Placement placement,
                   PlaceVariables(options.variables,
                                  static_cast<int>(options.addresses.size()),
                                  options.split_threshold_bytes));
  ASSIGN_OR_RETURN(ClientCredentials credentials,
                   MakeClientCredentials(options.security));
  // One UCX messenger for all the shards; none (gRPC, said once) where UCX
  // cannot start.
  std::shared_ptr<ucx::Messenger> messenger;
  if (options.ucx) {
    ucx::MessengerOptions ucx_options;
    ucx_options.transports = options.ucx_transports;
    absl::StatusOr<std::unique_ptr<ucx::Messenger>> made =
        ucx::Messenger::Create(ucx_options);
    if (made.ok()) {
      messenger = *std::move(made);
    } else {
      spdlog::warn(
          "worker {}: UCX cannot start here ({}); pushes and pulls go over "
          "gRPC",
          options.worker_id, made.status().ToString());
    }
  }
  std::vector<std::unique_ptr<ShardChannel>> channels;
  std::vector<const GrpcShardChannel*> grpc_channels;
  std::vector<const UcxShardChannel*> ucx_channels;
  for (size_t i = 0; i < options.addresses.size(); ++i) {
    const std::string& address = options.addresses[i];
    auto channel = std::make_unique<GrpcShardChannel>(
        static_cast<int>(i), address,
        CreatePsChannel(address, options.max_message_bytes, credentials),
        options.shared_memory);
    grpc_channels.push_back(channel.get());
    if (messenger == nullptr) {
      channels.push_back(std::move(channel));
      continue;
    }
    // The UCX link goes to the host the gRPC channel dials.
    std::string host;
    int port = 0;
    RETURN_IF_ERROR(
        Annotate(SplitHostPortUnbracketed(address, &host, &port),
                 absl::StrCat("grpc client: addresses[", i, "] for UCX: ")));
    auto linked =
        std::make_unique<UcxShardChannel>(std::move(channel), messenger, host);
    ucx_channels.push_back(linked.get());
    channels.push_back(std::move(linked));
  }
  ShardedClientOptions sharded;
  sharded.cluster = std::move(options.cluster);
  sharded.worker_id = options.worker_id;
  sharded.rpc_timeout = options.rpc_timeout;
  sharded.run_dir = std::move(options.run_dir);
  sharded.wire = options.wire;
  return std::unique_ptr<RemotePsClient>(new RemotePsClient(
      std::move(placement), std::move(channels), std::move(sharded),
      std::move(grpc_channels), std::move(ucx_channels)));
}

RemotePsClient::PayloadBytes RemotePsClient::payload_bytes() const {
  PayloadBytes bytes;
  for (const GrpcShardChannel* c : grpc_channels_) {
    bytes.sent += c->sent_bytes();
    bytes.received += c->received_bytes();
    bytes.shared_sent += c->shared_sent_bytes();
    bytes.shared_received += c->shared_received_bytes();
  }
  for (const UcxShardChannel* c : ucx_channels_) {
    bytes.ucx_sent += c->ucx_sent_bytes();
    bytes.ucx_received += c->ucx_received_bytes();
  }
  bytes.sent += bytes.ucx_sent;
  bytes.received += bytes.ucx_received;
  return bytes;
}

}  // namespace ps
}  // namespace psgd
