#include "common/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "proto/status_details.pb.h"

namespace psgd {

// absl::StatusCode and grpc::StatusCode both follow google.rpc.Code, 0..16.
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) ==
              static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
static_assert(static_cast<int>(absl::StatusCode::kDataLoss) ==
              static_cast<int>(grpc::StatusCode::DATA_LOSS));

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = status.raw_code();
  if (code < 0 || code > static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)) {
    code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  }
  rpc::StatusDetails details;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& value) {
    rpc::StatusPayload* p = details.add_payloads();
    p->set_type_url(std::string(url));
    p->set_value(std::string(value));
  });
  return grpc::Status(
      static_cast<grpc::StatusCode>(code), std::string(status.message()),
      details.payloads().empty() ? std::string() : details.SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  absl::Status out(static_cast<absl::StatusCode>(code), status.error_message());
  rpc::StatusDetails details;
  // Details that do not parse (another server's, a different format) are
  // left out: the code and the message still say what happened.
  if (!status.error_details().empty() &&
      details.ParseFromString(status.error_details())) {
    for (const rpc::StatusPayload& p : details.payloads()) {
      out.SetPayload(p.type_url(), absl::Cord(p.value()));
    }
  }
  return out;
}

}  // namespace psgd
