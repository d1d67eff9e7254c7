// --help for the project's programs: lists every flag defined in the
// project's own sources (a daemon's flags often live in a library beside its
// main file, e.g. ps/server/server_flags.cc), not only the main file's, as
// Abseil does by default.
//
// Thread-safety: call once at the start of main, before ParseCommandLine.
#ifndef PSGD_COMMON_FLAGS_USAGE_H_
#define PSGD_COMMON_FLAGS_USAGE_H_

#include "absl/strings/string_view.h"

namespace psgd {

// Sets the usage message and which flags --help, --helpshort and --helpfull
// show (--helpfull also shows Abseil's own).
void SetProgramUsage(absl::string_view message);

// Whether a flag defined in `filename` is one of the project's (not
// Abseil's or another library's).
bool IsProjectFlagFile(absl::string_view filename);

}  // namespace psgd

#endif  // PSGD_COMMON_FLAGS_USAGE_H_
