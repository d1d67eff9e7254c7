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

void VariableSpecToProto(const VariableSpec& spec, wire::VariableSpec* out) {
  out->set_name(spec.name);
  out->mutable_shape()->Assign(spec.shape.begin(), spec.shape.end());
  out->set_kind(VariableKindToProto(spec.kind));
  if (spec.slice_of.has_value()) {
    SliceOfToProto(*spec.slice_of, out->mutable_slice_of());
  } else {
    out->clear_slice_of();
  }
}

VariableSpecRead VariableSpecFromProto(const wire::VariableSpec& p) {
  VariableSpecRead read;
  read.spec.name = p.name();
  read.spec.shape.assign(p.shape().begin(), p.shape().end());
  read.kind = VariableKindFromProto(p.kind());
  if (read.kind.has_value()) read.spec.kind = *read.kind;
  if (p.has_slice_of()) read.spec.slice_of = SliceOfFromProto(p.slice_of());
  return read;
}

}  // namespace ps
}  // namespace psgd
