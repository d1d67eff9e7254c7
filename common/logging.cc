#include "common/logging.h"

#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"

ABSL_FLAG(std::string, log_level, "info",
          "Log level: trace, debug, info, warn, error, critical or off.");

namespace psgd {

absl::Status ParseLogLevel(absl::string_view name,
                           spdlog::level::level_enum* level) {
  static constexpr struct {
    const char* name;
    spdlog::level::level_enum level;
  } kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"critical", spdlog::level::critical},
      {"off", spdlog::level::off},
  };
  for (const auto& l : kLevels) {
    if (name == l.name) {
      *level = l.level;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level '", name,
                   "' (expected trace, debug, info, warn, error, critical or "
                   "off)"));
}

std::string LogPattern(absl::string_view process_name) {
  return absl::StrCat("[%Y-%m-%d %H:%M:%S.%e] [", process_name, "] [%l] %v");
}

absl::Status InitLogging(absl::string_view process_name,
                         absl::string_view level) {
  spdlog::level::level_enum parsed;
  if (absl::Status s = ParseLogLevel(level, &parsed); !s.ok()) return s;
  // Not registered by name, so that InitLogging may run more than once.
  auto logger = std::make_shared<spdlog::logger>(
      std::string(process_name.empty() ? "psgd" : process_name),
      std::make_shared<spdlog::sinks::stderr_sink_mt>());
  spdlog::set_default_logger(std::move(logger));
  spdlog::set_pattern(LogPattern(process_name));
  spdlog::set_level(parsed);
  return absl::OkStatus();
}

absl::Status InitLoggingFromFlags(absl::string_view process_name) {
  return InitLogging(process_name, absl::GetFlag(FLAGS_log_level));
}

}  // namespace psgd
