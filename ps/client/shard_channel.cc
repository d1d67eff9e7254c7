#include "ps/client/shard_channel.h"

#include <utility>

namespace psgd {
namespace ps {
namespace {

class Finished final : public ShardCall {
 public:
  explicit Finished(absl::Status status) : status_(std::move(status)) {}
  absl::Status Await() override { return status_; }

 private:
  const absl::Status status_;
};

}  // namespace

std::unique_ptr<ShardCall> FinishedCall(absl::Status status) {
  return std::make_unique<Finished>(std::move(status));
}

}  // namespace ps
}  // namespace psgd
