#include "ps/state/optimizer_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/status_macros.h"

namespace {
const psgd::ps::OptimizerOptions kDefaults;
}  // namespace

ABSL_FLAG(std::string, optimizer, "adam",
          "adam (TensorFlow's), sgd or momentum (PyTorch's SGD).");
ABSL_FLAG(double, learning_rate, kDefaults.learning_rate, "Learning rate.");
ABSL_FLAG(double, beta1, kDefaults.beta1, "Adam beta1.");
ABSL_FLAG(double, beta2, kDefaults.beta2, "Adam beta2.");
ABSL_FLAG(double, epsilon, kDefaults.epsilon, "Adam epsilon.");
ABSL_FLAG(double, momentum, kDefaults.momentum,
          "--optimizer=momentum: the momentum, in [0, 1).");
ABSL_FLAG(bool, nesterov, kDefaults.nesterov,
          "--optimizer=momentum: Nesterov's form.");
ABSL_FLAG(double, weight_decay, kDefaults.weight_decay,
          "sgd and momentum: L2 on every variable's gradient, as PyTorch's "
          "SGD.");
ABSL_FLAG(std::vector<std::string>, no_weight_decay, {},
          "Comma-separated variables exempt from --weight_decay.");

namespace psgd {
namespace ps {

absl::StatusOr<OptimizerOptions> OptimizerOptionsFromFlags() {
  OptimizerOptions o;
  ASSIGN_OR_RETURN(o.kind, ParseOptimizerKind(absl::GetFlag(FLAGS_optimizer)));
  o.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  o.beta1 = absl::GetFlag(FLAGS_beta1);
  o.beta2 = absl::GetFlag(FLAGS_beta2);
  o.epsilon = absl::GetFlag(FLAGS_epsilon);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.nesterov = absl::GetFlag(FLAGS_nesterov);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.no_weight_decay = absl::GetFlag(FLAGS_no_weight_decay);
  return o;
}

}  // namespace ps
}  // namespace psgd
