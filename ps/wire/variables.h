// What a variable is (common/model_variables.h's VariableSpec, VariableKind
// and SliceOf; proto/variable.proto), converted once: the wire's tensors and
// Status
// (ps/wire/wire.h) and the checkpoint files (ps/checkpoint/checkpoint.h)
// both use these.
//
// Thread-safety: pure functions.
#ifndef PSGD_PS_WIRE_VARIABLES_H_
#define PSGD_PS_WIRE_VARIABLES_H_

#include <optional>

#include "common/model_variables.h"
#include "proto/variable.pb.h"

namespace psgd {
namespace ps {

wire::VariableKind VariableKindToProto(VariableKind kind);
// nullopt for VARIABLE_KIND_UNSPECIFIED and values this build does not
// know.
std::optional<VariableKind> VariableKindFromProto(int kind);

void SliceOfToProto(const SliceOf& slice, wire::SliceOf* out);
SliceOf SliceOfFromProto(const wire::SliceOf& slice);

// A variable's identity (its initializer is not part of it).
void VariableSpecToProto(const VariableSpec& spec, wire::VariableSpec* out);
// The kind as VariableKindFromProto reads it: nullopt for one not said or
// not known (each caller decides what that means).
struct VariableSpecRead {
  VariableSpec spec;
  std::optional<VariableKind> kind;
};
VariableSpecRead VariableSpecFromProto(const wire::VariableSpec& spec);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_VARIABLES_H_
