#include "worker/cli.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/flags_usage.h"
#include "common/logging.h"

namespace psgd {

int RunProgram(int argc, char** argv, const char* program, const char* usage,
               absl::FunctionRef<absl::Status()> run) {
  SetProgramUsage(usage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr,
                 "%s: unexpected argument '%s' (flags are --name=value)\n",
                 program, rest[1]);
    return 2;
  }
  if (absl::Status s = InitLoggingFromFlags(program); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, std::string(s.message()).c_str());
    return 2;
  }
  const absl::Status s = run();
  if (s.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", program, s.ToString().c_str());
  return absl::IsInvalidArgument(s) ? 2 : 1;
}

}  // namespace psgd
