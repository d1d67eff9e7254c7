// A reason carried by a status as a payload (so that callers tell failures
// apart by type, never by message, also across gRPC: common/grpc_status.h
// carries payloads): an enum's name under a type URL. ps::PushRefusal,
// ps::LeaseRefusal and ps::SharedMemoryRefusal ride statuses this way.
//
//   s = WithReason(std::move(s), kUrl, Name(reason));
//   Reason r = ReasonOf(s, kUrl, kAllReasons, &Name, Reason::kNone);
//
// Thread-safety: plain functions.
#ifndef PSGD_COMMON_STATUS_REASON_H_
#define PSGD_COMMON_STATUS_REASON_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace psgd {

// `status` (not OK) with `name` under `url`; OK stays OK.
inline absl::Status WithReason(absl::Status status, absl::string_view url,
                               absl::string_view name) {
  if (!status.ok()) status.SetPayload(url, absl::Cord(name));
  return status;
}

// The reason of `all` whose name(r) is the payload under `url`; `none`
// without one (OK, another error, an unknown name).
template <typename Reason, size_t N>
Reason ReasonOf(const absl::Status& status, absl::string_view url,
                const Reason (&all)[N], absl::string_view (*name)(Reason),
                Reason none) {
  if (status.ok()) return none;
  const absl::optional<absl::Cord> payload = status.GetPayload(url);
  if (!payload.has_value()) return none;
  for (Reason r : all) {
    if (*payload == name(r)) return r;
  }
  return none;
}

}  // namespace psgd

#endif  // PSGD_COMMON_STATUS_REASON_H_
