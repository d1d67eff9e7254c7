// The model names a cluster config may give (model { name }): the worker's
// registry's networks (worker/models/registry.h, whose test checks that the
// two lists are the same), and "external" for a worker program's own model
// (a psgd.torch module). The config loader refuses any other, so that a
// misspelt name stops every task, the servers included, before they serve.
//
// Thread-safety: constants.
#ifndef PSGD_COMMON_MODEL_NAMES_H_
#define PSGD_COMMON_MODEL_NAMES_H_

#include "absl/strings/string_view.h"

namespace psgd {

inline constexpr absl::string_view kRegistryModelNames[] = {
    "cifar10_tutorial", "cifar10_linear", "resnet20", "resnet56",
    "wrn_16_4",         "wrn_28_10",      "cnn10",    "resnet50_cifar",
};

// A worker program's own model (worker/session/session_config.h).
inline constexpr absl::string_view kExternalModelName = "external";

}  // namespace psgd

#endif  // PSGD_COMMON_MODEL_NAMES_H_
