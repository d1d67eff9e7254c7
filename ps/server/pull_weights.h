// The tensors a pull is answered with, for every transport that answers
// pulls (the gRPC service, ps/server/grpc_service.h; the UCX data plane,
// ps/server/ucx_data_plane.h): a snapshot's weights as float32, referenced
// straight from the snapshot, or in the cluster's wire dtype
// (ps/wire/wire_dtype.h), encoded once per snapshot and shared by every pull
// that answers with it (in sync mode all M workers pull the same one).
//
// Thread-safety: thread-safe.
#ifndef PSGD_PS_SERVER_PULL_WEIGHTS_H_
#define PSGD_PS_SERVER_PULL_WEIGHTS_H_

#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "common/mutex.h"
#include "ps/shard/shard.h"
#include "ps/state/types.h"

namespace psgd {
namespace ps {

class PullWeights {
 public:
  // The tensors of a pull, and what keeps their memory alive (the snapshot
  // or its encoding): hold keep_alive as long as the tensors are read.
  struct Tensors {
    std::vector<TensorBytes> tensors;
    std::shared_ptr<const void> keep_alive;
  };

  explicit PullWeights(DType wire_weights);
  ~PullWeights();
  PullWeights(const PullWeights&) = delete;
  PullWeights& operator=(const PullWeights&) = delete;

  // The tensors `selected` (indices into the snapshot's layout) of
  // `snapshot`, in the wire dtype.
  Tensors Get(const ParameterShard::Snapshot& snapshot,
              absl::Span<const int> selected);

 private:
  struct Encoded;

  const DType dtype_;
  Mutex mu_;
  // The newest snapshot's encoding (wire dtypes other than float32).
  std::shared_ptr<Encoded> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_PULL_WEIGHTS_H_
