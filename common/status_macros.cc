#include "common/status_macros.h"

namespace psgd {

absl::Status Annotate(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(prefix, status.message()));
  // Payloads say what kind of failure it is (e.g. ps::PushRefusalOf): keep
  // them.
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& value) {
    out.SetPayload(url, value);
  });
  return out;
}

absl::Status FirstNotOk(absl::Span<const absl::Status> statuses) {
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace psgd
