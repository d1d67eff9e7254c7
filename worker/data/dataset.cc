#include "worker/data/dataset.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/data/synthetic.h"
#include "worker/random.h"

namespace psgd {

absl::StatusOr<Dataset> OpenDataset(const DataOptions& options) {
  Dataset d;
  d.name = options.name;
  if (options.name == "cifar10") {
    ASSIGN_OR_RETURN(d.train, LoadCifar10(options.data_dir, Split::kTrain,
                                          options.records_per_file));
    ASSIGN_OR_RETURN(d.test, LoadCifar10(options.data_dir, Split::kTest,
                                         options.records_per_file));
    return d;
  }
  if (options.name == "synthetic") {
    ASSIGN_OR_RETURN(d.train, MakeSyntheticSet(options.synthetic_train,
                                               options.synthetic_seed));
    ASSIGN_OR_RETURN(d.test,
                     MakeSyntheticSet(options.synthetic_test,
                                      DeriveSeed({options.synthetic_seed, 1})));
    return d;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown data set '", options.name, "' (expected cifar10 or synthetic)"));
}

}  // namespace psgd
