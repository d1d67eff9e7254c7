// The bounds of the parameter-server options that a cluster config
// (common/cluster_config.h) and ps_server's flags (through the shard's
// ShardOptions, ps/state/options.h) both set, each written once, as
// leveldb's SanitizeOptions checks each bound in one place. The two callers
// word the problem their own way: the config loader with the file, the line
// and the config's field, ShardOptions' sanitizer as "server option
// FIELD=VALUE". The rules across tasks (N of M against the worker tasks,
// addresses, ports, checkpoint directories) stay in the loader; those of
// options that only the ps options have stay in their sanitizers (message
// sizes in ShardOptions', addresses in ps/server's ServerOptions').
//
// Thread-safety: a pure function over values.
#ifndef PSGD_COMMON_PS_OPTION_RULES_H_
#define PSGD_COMMON_PS_OPTION_RULES_H_

#include <cstdint>
#include <string>

#include "absl/types/optional.h"

namespace psgd {

// The values as both front ends mean them: "off" is an unset optional (the
// config leaves the field out, ShardOptions says -1).
struct PsOptionValues {
  bool async = false;
  bool adam = true;  // the optimizer is Adam (else SGD)
  int replicas_to_aggregate = 1;
  absl::optional<int64_t> staleness_bound;     // unset: no bound
  absl::optional<int64_t> max_push_staleness;  // unset: no limit
  bool scale_lr_by_staleness = false;
  double dc_asgd_lambda = 0;           // 0: off
  absl::optional<double> async_beta1;  // unset: the optimizer's beta1
  double worker_lease_seconds = 0;     // 0: no lease
  int64_t checkpoint_every_steps = 0;  // 0: not by steps
  int checkpoint_keep = 3;
};

// The first value out of its bounds.
struct PsOptionProblem {
  // ShardOptions' name: "staleness_bound", "scale_lr_by_staleness",
  // "worker_lease_seconds", "checkpoint.keep", ...
  std::string field;
  std::string value;  // as text: "-1", "0.5", "true"
  // What is wrong, after the value: "is negative", "applies to async mode
  // only".
  std::string rule;
  // True when the value itself is out of range; false when the field may
  // not be set in this mode or with this optimizer (a message may then
  // leave the value out).
  bool out_of_range = true;
};

// nullopt when every value is within its bounds.
absl::optional<PsOptionProblem> FindPsOptionProblem(const PsOptionValues& v);

}  // namespace psgd

#endif  // PSGD_COMMON_PS_OPTION_RULES_H_
