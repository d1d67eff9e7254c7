// The one rule for a cluster's name, the same in the config file, the
// server flags and the servers' options: 1 to 64 letters, digits, '-', '_'
// or '.' (it names the run directory and checkpoint files).
//
// Thread-safety: pure functions.
#ifndef PSGD_COMMON_CLUSTER_NAME_H_
#define PSGD_COMMON_CLUSTER_NAME_H_

#include "absl/strings/string_view.h"

namespace psgd {

inline constexpr int kMaxClusterNameLength = 64;
// The rule in words, for error messages.
inline constexpr absl::string_view kClusterNameRule =
    "1..64 letters, digits, '-', '_' or '.'";

bool IsValidClusterName(absl::string_view name);

}  // namespace psgd

#endif  // PSGD_COMMON_CLUSTER_NAME_H_
