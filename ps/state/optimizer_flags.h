// The optimizer's command-line flags, defined once for every program that
// applies the servers' optimizer: ps_server (ps/server/server_flags.cc) and
// train_local (worker/train_local.cc, which applies it in the process).
//
//   --optimizer=adam|sgd|momentum  --learning_rate  --beta1 --beta2 --epsilon
//   --momentum  --nesterov  --weight_decay  --no_weight_decay=a,b
//
// Thread-safety: reads the flags; call after parsing them.
#ifndef PSGD_PS_STATE_OPTIMIZER_FLAGS_H_
#define PSGD_PS_STATE_OPTIMIZER_FLAGS_H_

#include "absl/status/statusor.h"
#include "ps/state/options.h"

namespace psgd {
namespace ps {

// The options the flags give (the schedule left at its default: the caller
// sets it). INVALID_ARGUMENT naming --optimizer for an unknown kind; the
// values themselves are checked by ValidateOptimizerOptions, which the
// callers' sanitizers run.
absl::StatusOr<OptimizerOptions> OptimizerOptionsFromFlags();

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_OPTIMIZER_FLAGS_H_
