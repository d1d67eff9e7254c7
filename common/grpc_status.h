// The one place where absl::Status and grpc::Status are converted into each
// other. The adapters (ps/grpc_*.cc) call these at the edge; the core never
// sees grpc::Status.
#ifndef PSGD_COMMON_GRPC_STATUS_H_
#define PSGD_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace psgd {

// Same code (the two enums share their numbering), message and payloads
// (carried in the gRPC status details as proto/status_details.proto).
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace psgd

#endif  // PSGD_COMMON_GRPC_STATUS_H_
