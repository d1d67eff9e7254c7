// The main() of the local worker programs (train_local, compute_bench; the
// cluster worker, worker_main.cc, has its own): flags, logging, and one
// error line.
//
// Thread-safety: call once, from main().
#ifndef PSGD_WORKER_CLI_H_
#define PSGD_WORKER_CLI_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace psgd {

// Parses the flags (absl's parser reports unknown flags and exits; a
// positional argument is refused here), sets up logging under `program`'s
// name with --log_level, and runs `run`. Returns the exit status: 0 on
// success; 2 for bad flags or an INVALID_ARGUMENT status; 1 for any other
// failure, which is printed as "<program>: <status>" on stderr.
int RunProgram(int argc, char** argv, const char* program, const char* usage,
               absl::FunctionRef<absl::Status()> run);

}  // namespace psgd

#endif  // PSGD_WORKER_CLI_H_
