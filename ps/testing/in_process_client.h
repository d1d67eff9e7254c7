// A PsClient over ParameterShard objects in this process: the same core the
// gRPC server wraps, without sockets. For tests, including those that run
// under ThreadSanitizer (Debian's gRPC is not tsan-built).
//
// Thread-safety: thread-safe (it holds no mutable state); many clients, one
// per worker thread, may share the shards. The shards are not owned and
// must outlive the client.
#ifndef PSGD_PS_TESTING_IN_PROCESS_CLIENT_H_
#define PSGD_PS_TESTING_IN_PROCESS_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "ps/state/placement.h"
#include "ps/client/ps_client.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

class InProcessPsClient final : public PsClient {
 public:
  // shards[i] serves shard i of `placement`. Every request carries
  // `cluster`; worker_id is this client's worker (-1: none, for a chief or
  // an evaluator that only initialises, pulls or shuts down).
  // INVALID_ARGUMENT when the number of shards differs from the placement's
  // or a shard is null.
  static absl::StatusOr<std::unique_ptr<InProcessPsClient>> Create(
      std::vector<ParameterShard*> shards, Placement placement,
      std::string cluster, int worker_id);

  const Placement& placement() const override { return placement_; }
  absl::Status Initialize(
      absl::Span<const NamedConstTensorView> variables) override;
  absl::Status Join() override;
  absl::Status Leave() override;
  absl::StatusOr<ModelVersion> Pull(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  absl::StatusOr<PushResult> Push(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  absl::StatusOr<ModelVersion> PullPart(
      const ModelVersion& min_version, absl::Time deadline,
      absl::Span<const NamedTensorView> out) override;
  absl::StatusOr<PushResult> PushPart(
      const ModelVersion& version,
      absl::Span<const NamedConstTensorView> gradients) override;
  absl::StatusOr<std::vector<ShardStatus>> Status() override;
  absl::Status Shutdown(absl::string_view reason) override;
  absl::Status Rollback(int64_t label, int64_t generation) override;
  absl::Status RequestCheckpoint(int64_t label, bool now) override;

 private:
  InProcessPsClient(std::vector<ParameterShard*> shards, Placement placement,
                    std::string cluster, int worker_id)
      : shards_(std::move(shards)),
        placement_(std::move(placement)),
        cluster_(std::move(cluster)),
        worker_id_(worker_id) {}

  // Pull and PullPart once `model` is ordered (null: not asked for).
  absl::StatusOr<ModelVersion> PullModel(const ModelVersion& min_version,
                                         absl::Time deadline,
                                         absl::Span<float* const> model,
                                         bool part);
  // Push and PushPart once `model` is ordered.
  absl::StatusOr<PushResult> PushModel(const ModelVersion& version,
                                       absl::Span<const float* const> model,
                                       bool part);

  // OK when every shard serves cluster_; checked before each call.
  absl::Status CheckClusters() const;

  const std::vector<ParameterShard*> shards_;  // Not owned.
  const Placement placement_;
  const std::string cluster_;
  const int worker_id_;
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_TESTING_IN_PROCESS_CLIENT_H_
