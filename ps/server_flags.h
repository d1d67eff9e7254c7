// The command-line flags of ps_server and what they fill: ServerOptions
// (ps/options.h). The cluster config file of the next issue will fill the
// same struct; flags given explicitly will then override it.
//
// Thread-safety: call after absl::ParseCommandLine, from one thread.
#ifndef PSGD_PS_SERVER_FLAGS_H_
#define PSGD_PS_SERVER_FLAGS_H_

#include "absl/status/statusor.h"
#include "ps/options.h"

namespace psgd {
namespace ps {

// The options the flags give, validated (ValidateServerOptions);
// INVALID_ARGUMENT naming the flag and its value otherwise.
absl::StatusOr<ServerOptions> ServerOptionsFromFlags();

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_FLAGS_H_
