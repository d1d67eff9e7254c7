// RETURN_IF_ERROR and ASSIGN_OR_RETURN for absl::Status / absl::StatusOr
// (Debian's Abseil 20220623 ships neither).
//
//   RETURN_IF_ERROR(store.Apply(grad));
//   ASSIGN_OR_RETURN(auto config, LoadConfig(path));
//   ASSIGN_OR_RETURN(std::unique_ptr<Foo> foo, Foo::Create(), _.Prepend("foo:
//   "));
//
// Both evaluate their argument exactly once.
#ifndef PSGD_COMMON_STATUS_MACROS_H_
#define PSGD_COMMON_STATUS_MACROS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace psgd {

// Returns `status` with `prefix` put in front of its message; the code and
// the payloads are kept. OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view prefix);

// The first of `statuses` that is not OK; OK when all are.
absl::Status FirstNotOk(absl::Span<const absl::Status> statuses);

}  // namespace psgd

#define PSGD_STATUS_CONCAT_INNER_(x, y) x##y
#define PSGD_STATUS_CONCAT_(x, y) PSGD_STATUS_CONCAT_INNER_(x, y)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                                        \
  do {                                                               \
    const ::absl::Status psgd_status_ = (expr);                      \
    if (ABSL_PREDICT_FALSE(!psgd_status_.ok())) return psgd_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the enclosing function, else moves the value into `lhs` (a declaration or
// an lvalue).
#define ASSIGN_OR_RETURN(lhs, rexpr)                                         \
  PSGD_ASSIGN_OR_RETURN_IMPL_(PSGD_STATUS_CONCAT_(psgd_statusor_, __LINE__), \
                              lhs, rexpr)

#define PSGD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                \
  if (ABSL_PREDICT_FALSE(!statusor.ok())) {               \
    return std::move(statusor).status();                  \
  }                                                       \
  lhs = std::move(statusor).value()

#endif  // PSGD_COMMON_STATUS_MACROS_H_
