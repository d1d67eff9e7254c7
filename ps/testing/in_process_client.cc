#include "ps/testing/in_process_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {

// A push is handled when it starts; a pull is registered with the shard
// when it starts and awaited until its deadline. The weights are sent in
// the shard's wire dtype and taken apart by the client's assembler, as the
// gRPC service sends them (ps/server/grpc_service.cc).
class InProcessShardChannel::Exchange final : public ShardExchange {
 public:
  explicit Exchange(InProcessShardChannel* channel) : channel_(channel) {}
  // A pull that was never awaited is withdrawn (its callback holds only
  // the PendingPull, so one answering right now is harmless).
  ~Exchange() override {
    if (pull_ != nullptr && ticket_ != 0) {
      channel_->handler_.shard()->CancelPull(ticket_);
    }
  }

  void StartPush(const wire::PushRequest& header,
                 absl::Span<const TensorBytes> gradients,
                 std::shared_ptr<const void> in_use, absl::Time /*deadline*/,
                 PushMethod method) override {
    push_request_ = header;
    TensorBytesToProto(
        std::vector<TensorBytes>(gradients.begin(), gradients.end()),
        push_request_.mutable_gradients());
    in_use.reset();  // copied
    push_response_.Clear();
    push_status_ = channel_->handler_.Push(push_request_, &push_response_,
                                           /*shared=*/{},
                                           /*shared_is_private=*/false,
                                           /*keep=*/nullptr, method);
  }

  void StartCommit(const wire::CommitRequest& request,
                   absl::Time /*deadline*/) override {
    push_response_.Clear();
    push_status_ = channel_->handler_.Commit(request, &push_response_);
  }

  void StartPull(const wire::PullRequest& request,
                 absl::Time deadline) override {
    pull_request_ = request;
    deadline_ = deadline;
    pull_ = std::make_shared<PendingPull>();
    const absl::Time arrived = absl::Now();
    ticket_ = channel_->handler_.Pull(
        pull_request_,
        [pull = pull_, arrived](absl::StatusOr<ParameterShard::Snapshot> s) {
          MutexLock lock(&pull->mu);
          pull->result = std::move(s);
          pull->wait = absl::Now() - arrived;
          pull->done = true;
          pull->answered.SignalAll();
        });
    MutexLock lock(&cancel_mu_);
    cancellable_ = pull_;
    cancel_ticket_ = ticket_;
  }

  void Cancel() override {
    MutexLock lock(&cancel_mu_);
    if (cancellable_ == nullptr || cancel_ticket_ == 0 ||
        !channel_->handler_.shard()->CancelPull(cancel_ticket_)) {
      return;  // none under way, or answered already
    }
    MutexLock pull_lock(&cancellable_->mu);
    cancellable_->result = absl::CancelledError("pull cancelled");
    cancellable_->done = true;
    cancellable_->answered.SignalAll();
  }

  absl::Status Await() override {
    if (pull_ == nullptr) return push_status_;
    std::shared_ptr<PendingPull> pull = std::move(pull_);
    // Once awaited, the pull is no longer Cancel's.
    struct Done {
      Exchange* e;
      ~Done() {
        MutexLock lock(&e->cancel_mu_);
        e->cancellable_ = nullptr;
        e->cancel_ticket_ = 0;
      }
    } done_with_pull{this};
    bool answered;
    {
      MutexLock lock(&pull->mu);
      answered = pull->answered.WaitUntil(&pull->mu, deadline_, [&]() {
        pull->mu.AssertHeld();
        return pull->done;
      });
    }
    // Withdraw a pull that still waits; one answering right now finishes
    // at once.
    if (!answered && ticket_ != 0 &&
        channel_->handler_.shard()->CancelPull(ticket_)) {
      snapshot_ = absl::DeadlineExceededError(absl::StrCat(
          "pull for step >= ", pull_request_.min_step(), " timed out"));
      return snapshot_.status();
    }
    MutexLock lock(&pull->mu);
    pull->answered.Wait(&pull->mu, [&]() {
      pull->mu.AssertHeld();
      return pull->done;
    });
    snapshot_ = std::move(pull->result);
    wait_ = pull->wait;
    return snapshot_.status();
  }

  absl::Status ReadPush(wire::PushResponse* response) override {
    *response = push_response_;
    return absl::OkStatus();
  }

  absl::Status ReadPull(PulledVersion* version,
                        ShardAssembler* assembler) override {
    RETURN_IF_ERROR(snapshot_.status());
    const WeightsSnapshot& s = **snapshot_;
    ParameterShard* shard = channel_->handler_.shard();
    // All tensors, or those the request names (a pull of a part).
    const std::vector<std::string> names(pull_request_.variables().begin(),
                                         pull_request_.variables().end());
    absl::StatusOr<std::vector<int>> selected = s.layout->Select(names);
    RETURN_IF_ERROR(
        Annotate(selected.status(),
                 absl::StrCat("shard ", shard->options().shard_index, ": ")));
    std::vector<TensorBytes> floats;
    for (int i : *selected) {
      floats.push_back(FloatTensorBytes(s.layout->names[i], s.layout->shapes[i],
                                        s.weights[i].data()));
    }
    version->step = s.step;
    version->generation = s.generation;
    version->wait = wait_;
    version->learning_rate = s.learning_rate;
    for (const TensorBytes& t :
         encoder_.FromFloat(floats, channel_->handler_.wire().weights)) {
      RETURN_IF_ERROR(assembler->Add(t));
    }
    return absl::OkStatus();
  }

 private:
  struct PendingPull {
    Mutex mu;
    CondVar answered;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::StatusOr<ParameterShard::Snapshot> result ABSL_GUARDED_BY(mu) =
        absl::UnknownError("pull did not finish");
    absl::Duration wait ABSL_GUARDED_BY(mu);
  };

  InProcessShardChannel* const channel_;  // Not owned.
  wire::PushRequest push_request_;
  wire::PushResponse push_response_;
  absl::Status push_status_;
  wire::PullRequest pull_request_;
  absl::Time deadline_;
  // The pull under way (null: none, or awaited).
  std::shared_ptr<PendingPull> pull_;
  uint64_t ticket_ = 0;
  // The pull under way for Cancel, from another thread.
  Mutex cancel_mu_;
  std::shared_ptr<PendingPull> cancellable_ ABSL_GUARDED_BY(cancel_mu_);
  uint64_t cancel_ticket_ ABSL_GUARDED_BY(cancel_mu_) = 0;
  absl::StatusOr<ParameterShard::Snapshot> snapshot_;
  absl::Duration wait_;
  WireEncoder encoder_;
};

InProcessShardChannel::InProcessShardChannel(int index, ParameterShard* shard,
                                             WireDTypes wire)
    : name_(absl::StrCat("shard ", index)),
      shard_(shard),
      handler_(shard, wire) {}

std::unique_ptr<ShardCall> InProcessShardChannel::Initialize(
    const wire::InitializeRequest& request, absl::Time /*deadline*/,
    wire::InitializeResponse* response) {
  return FinishedCall(handler_.Initialize(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::Join(
    const wire::JoinRequest& request, absl::Time /*deadline*/,
    wire::MembershipResponse* response) {
  return FinishedCall(handler_.Join(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::Leave(
    const wire::LeaveRequest& request, absl::Time /*deadline*/,
    wire::MembershipResponse* response) {
  return FinishedCall(handler_.Leave(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::Status(
    const wire::StatusRequest& request, absl::Time /*deadline*/,
    wire::StatusResponse* response) {
  return FinishedCall(handler_.Status(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::Shutdown(
    const wire::ShutdownRequest& request, absl::Time /*deadline*/,
    wire::ShutdownResponse* response) {
  return FinishedCall(handler_.Shutdown(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::Rollback(
    const wire::RollbackRequest& request, absl::Time /*deadline*/,
    wire::RollbackResponse* response) {
  return FinishedCall(handler_.Rollback(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::LeaseData(
    const wire::LeaseDataRequest& request, absl::Time /*deadline*/,
    wire::LeaseDataResponse* response) {
  return FinishedCall(handler_.LeaseData(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::Checkpoint(
    const wire::CheckpointRequest& request, absl::Time /*deadline*/,
    wire::CheckpointResponse* response) {
  return FinishedCall(handler_.Checkpoint(request, response));
}

std::unique_ptr<ShardCall> InProcessShardChannel::Health(
    absl::Time /*deadline*/, bool* serving) {
  *serving =
      !shard_->agreeing() && !shard_->AwaitShutdown(absl::InfinitePast());
  return FinishedCall(absl::OkStatus());
}

std::unique_ptr<ShardExchange> InProcessShardChannel::NewExchange() {
  return std::make_unique<Exchange>(this);
}

absl::StatusOr<std::unique_ptr<InProcessPsClient>> InProcessPsClient::Create(
    std::vector<ParameterShard*> shards, Placement placement,
    std::string cluster, int worker_id, WireDTypes wire) {
  ShardedClientOptions options;
  options.cluster = std::move(cluster);
  options.worker_id = worker_id;
  options.wire = wire;
  return Create(std::move(shards), std::move(placement), std::move(options),
                wire);
}

void LinkShardsInProcess(std::vector<ParameterShard*> shards) {
  if (shards.size() < 2 || shards[0] == nullptr) return;
  shards[0]->ConnectFollowers([shards](int shard, int64_t generation,
                                       absl::Span<const Decision> decisions) {
    return shards[shard]->ApplyDecisions(generation, decisions);
  });
}

absl::StatusOr<std::unique_ptr<InProcessPsClient>> InProcessPsClient::Create(
    std::vector<ParameterShard*> shards, Placement placement,
    ShardedClientOptions options, WireDTypes served) {
  for (ParameterShard* shard : shards) {
    if (shard == nullptr) {
      return absl::InvalidArgumentError("in-process client: a null shard");
    }
  }
  LinkShardsInProcess(shards);
  std::vector<std::unique_ptr<ShardChannel>> channels;
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i] == nullptr) {
      return absl::InvalidArgumentError("in-process client: a null shard");
    }
    channels.push_back(std::make_unique<InProcessShardChannel>(
        static_cast<int>(i), shards[i], served));
  }
  RETURN_IF_ERROR(
      Annotate(CheckChannels(placement, channels), "in-process client: "));
  return std::unique_ptr<InProcessPsClient>(new InProcessPsClient(
      std::move(placement), std::move(channels), std::move(options)));
}

}  // namespace ps
}  // namespace psgd
