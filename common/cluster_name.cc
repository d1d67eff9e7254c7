#include "common/cluster_name.h"

#include "absl/strings/ascii.h"

namespace psgd {

bool IsValidClusterName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxClusterNameLength) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' &&
        c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace psgd
