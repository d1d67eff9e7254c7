// Logging on spdlog: one pattern for every process, with the process name
// (e.g. "ps:0", "worker:3") in front of each line, and a level chosen by the
// --log_level flag (trace, debug, info, warn, error, critical, off).
//
//   int main(int argc, char** argv) {
//     absl::ParseCommandLine(argc, argv);
//     if (auto s = psgd::InitLoggingFromFlags("ps:0"); !s.ok()) { ... }
//     spdlog::info("listening on {}", address);
//
// Thread-safety: InitLogging* must run before other threads log; spdlog's
// default logger is thread-safe after that.
#ifndef PSGD_COMMON_LOGGING_H_
#define PSGD_COMMON_LOGGING_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

ABSL_DECLARE_FLAG(std::string, log_level);

namespace psgd {

// Parses a level name; INVALID_ARGUMENT naming the value and the choices.
absl::Status ParseLogLevel(absl::string_view name,
                           spdlog::level::level_enum* level);

// Sets the default logger's pattern (time, process name, level, message, to
// stderr) and level. INVALID_ARGUMENT for an unknown level.
absl::Status InitLogging(absl::string_view process_name,
                         absl::string_view level);

// InitLogging with the value of --log_level.
absl::Status InitLoggingFromFlags(absl::string_view process_name);

// The pattern InitLogging installs, for tests.
std::string LogPattern(absl::string_view process_name);

}  // namespace psgd

#endif  // PSGD_COMMON_LOGGING_H_
