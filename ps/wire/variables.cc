#include "ps/wire/variables.h"

namespace psgd {
namespace ps {

wire::VariableKind VariableKindToProto(VariableKind kind) {
  switch (kind) {
    case VariableKind::kParameter:
      return wire::PARAMETER;
    case VariableKind::kRunningStatistic:
      return wire::RUNNING_STATISTIC;
  }
  return wire::VARIABLE_KIND_UNSPECIFIED;
}

std::optional<VariableKind> VariableKindFromProto(int kind) {
  switch (kind) {
    case wire::PARAMETER:
      return VariableKind::kParameter;
    case wire::RUNNING_STATISTIC:
      return VariableKind::kRunningStatistic;
    default:
      return std::nullopt;
  }
}

void SliceOfToProto(const SliceOf& slice, wire::SliceOf* out) {
  out->set_variable(slice.variable);
  out->set_part(slice.part);
  out->set_row_begin(slice.row_begin);
}

SliceOf SliceOfFromProto(const wire::SliceOf& slice) {
  return SliceOf{slice.variable(), slice.part(), slice.row_begin()};
}

}  // namespace ps
}  // namespace psgd
