// gRPC arguments for messages of megabytes (a shard's gradients and
// weights), set alike on the parameter servers' and the workers' sides and
// on ps_bench's echo yardstick. docs/PERFORMANCE.md ("gRPC tuning") has
// what each measurably did on loopback.
//
// Thread-safety: pure functions.
#ifndef PSGD_COMMON_GRPC_TUNING_H_
#define PSGD_COMMON_GRPC_TUNING_H_

#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

namespace psgd {

void SetLargeMessageArgs(grpc::ChannelArguments* args);
void SetLargeMessageArgs(grpc::ServerBuilder* builder);

}  // namespace psgd

#endif  // PSGD_COMMON_GRPC_TUNING_H_
