// What a variable is (common/model_variables.h's VariableKind and SliceOf;
// proto/variable.proto), converted once: the wire's Initialize and Status
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

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_VARIABLES_H_
