#include "common/flags_usage.h"

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psgd {

bool IsProjectFlagFile(absl::string_view filename) {
  for (absl::string_view dir :
       {"common/", "configs/", "ps/", "worker/", "tests/", "tools/"}) {
    if (absl::StartsWith(filename, dir) ||
        absl::StrContains(filename, absl::StrCat("/", dir))) {
      return !absl::StrContains(filename, "absl/");
    }
  }
  return false;
}

void SetProgramUsage(absl::string_view message) {
  absl::SetProgramUsageMessage(message);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = &IsProjectFlagFile;
  config.contains_helpshort_flags = &IsProjectFlagFile;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace psgd
