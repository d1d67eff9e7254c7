// A worker's own batch-norm running statistics on disk, for clusters that
// keep them on the workers (model.batch_norm_statistics: LOCAL;
// docs/CLUSTER.md, "Batch norm"): a restarted worker goes on with the
// statistics its previous process had, not the initial ones.
//
// The file (RUN_DIR/worker-J.batch_norm) holds each state tensor, in the
// model's order, by name and element count, framed with a checksum
// (common/file_io.h) and written atomically.
//
// Thread-safety: free functions.
#ifndef PSGD_WORKER_CLUSTER_LOCAL_STATISTICS_H_
#define PSGD_WORKER_CLUSTER_LOCAL_STATISTICS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_variables.h"
#include "worker/models/model.h"

namespace psgd {

// Writes `state` (one tensor per spec of `specs`) to `path`. INTERNAL when
// it cannot be written; INVALID_ARGUMENT naming a missing tensor.
absl::Status SaveLocalStatistics(const std::string& path,
                                 const std::vector<VariableSpec>& specs,
                                 const NamedTensors& state);

// The statistics saved at `path`; nullopt when there is no file.
// DATA_LOSS naming the file when it is damaged; FAILED_PRECONDITION naming
// the file and the tensor when it holds another model's statistics.
absl::StatusOr<std::optional<NamedTensors>> LoadLocalStatistics(
    const std::string& path, const std::vector<VariableSpec>& specs);

}  // namespace psgd

#endif  // PSGD_WORKER_CLUSTER_LOCAL_STATISTICS_H_
