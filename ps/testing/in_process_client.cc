#include "ps/testing/in_process_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/client/model_slices.h"
#include "common/mutex.h"

namespace psgd {
namespace ps {

absl::StatusOr<std::unique_ptr<InProcessPsClient>> InProcessPsClient::Create(
    std::vector<ParameterShard*> shards, Placement placement,
    std::string cluster, int worker_id) {
  if (static_cast<int>(shards.size()) != placement.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("in-process client: ", shards.size(),
                     " shards for a placement over ", placement.num_shards));
  }
  for (ParameterShard* s : shards) {
    if (s == nullptr) {
      return absl::InvalidArgumentError("in-process client: a null shard");
    }
  }
  return std::unique_ptr<InProcessPsClient>(new InProcessPsClient(
      std::move(shards), std::move(placement), std::move(cluster), worker_id));
}

absl::Status InProcessPsClient::CheckClusters() const {
  for (ParameterShard* shard : shards_) {
    RETURN_IF_ERROR(shard->CheckCluster(cluster_));
  }
  return absl::OkStatus();
}

absl::Status InProcessPsClient::Initialize(
    absl::Span<const NamedConstTensorView> variables) {
  RETURN_IF_ERROR(CheckClusters());
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, variables, &model));
  for (int i = 0; i < num_shards(); ++i) {
    RETURN_IF_ERROR(
        shards_[i]->Initialize(ShardSlices(placement_, i, model)).status());
  }
  return absl::OkStatus();
}

absl::Status InProcessPsClient::Join() {
  RETURN_IF_ERROR(CheckClusters());
  for (ParameterShard* shard : shards_) {
    RETURN_IF_ERROR(shard->Join(worker_id_).status());
  }
  return absl::OkStatus();
}

absl::Status InProcessPsClient::Leave() {
  RETURN_IF_ERROR(CheckClusters());
  for (ParameterShard* shard : shards_) {
    RETURN_IF_ERROR(shard->Leave(worker_id_).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelVersion> InProcessPsClient::Pull(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  RETURN_IF_ERROR(CheckClusters());
  RETURN_IF_ERROR(CheckVersion(min_version, num_shards()));
  std::vector<float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, out, &model));
  return PullModel(min_version, deadline, model, /*part=*/false);
}

absl::StatusOr<ModelVersion> InProcessPsClient::PullPart(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  RETURN_IF_ERROR(CheckClusters());
  RETURN_IF_ERROR(CheckVersion(min_version, num_shards()));
  std::vector<float*> model;
  RETURN_IF_ERROR(OrderPart(placement_, out, &model));
  return PullModel(min_version, deadline, model, /*part=*/true);
}

absl::StatusOr<ModelVersion> InProcessPsClient::PullModel(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<float* const> model, bool part) {
  // The shards that hold some of the variables asked for (all, for a whole
  // pull).
  const std::vector<const float*> asked_model(model.begin(), model.end());
  std::vector<bool> to_ask(num_shards());
  for (int i = 0; i < num_shards(); ++i) {
    to_ask[i] = !part || !ShardSlices(placement_, i, asked_model).empty();
  }
  // Every shard at once, as the gRPC client does: each shard sees the
  // worker waiting in its pull (which protects its lease) for the whole wait.
  struct Pending {
    Mutex mu;
    CondVar done;
    int left ABSL_GUARDED_BY(mu) = 0;
    std::vector<absl::StatusOr<ParameterShard::Snapshot>> results
        ABSL_GUARDED_BY(mu);
    std::vector<absl::Duration> waits ABSL_GUARDED_BY(mu);
  };
  auto pending = std::make_shared<Pending>();
  {
    MutexLock lock(&pending->mu);
    pending->left = static_cast<int>(
        std::count(to_ask.begin(), to_ask.end(), true));
    pending->results.assign(num_shards(),
                            absl::UnknownError("pull did not finish"));
    pending->waits.assign(num_shards(), absl::ZeroDuration());
  }
  const absl::Time asked = absl::Now();
  std::vector<uint64_t> tickets;
  for (int i = 0; i < num_shards(); ++i) {
    if (!to_ask[i]) {
      tickets.push_back(0);
      continue;
    }
    tickets.push_back(shards_[i]->PullAsync(
        min_version.steps[i], worker_id_,
        [pending, i, asked](absl::StatusOr<ParameterShard::Snapshot> s) {
          MutexLock lock(&pending->mu);
          pending->results[i] = std::move(s);
          pending->waits[i] = absl::Now() - asked;
          if (--pending->left == 0) pending->done.SignalAll();
        },
        min_version.generation));
  }
  bool all_answered;
  {
    MutexLock lock(&pending->mu);
    all_answered =
        pending->done.WaitUntil(&pending->mu, deadline, [&]() {
          pending->mu.AssertHeld();
          return pending->left == 0;
        });
  }
  if (!all_answered) {
    // Withdraw the pulls that still wait; one answering right now finishes
    // at once.
    int withdrawn = 0;
    for (int i = 0; i < num_shards(); ++i) {
      withdrawn += tickets[i] != 0 && shards_[i]->CancelPull(tickets[i]);
    }
    MutexLock lock(&pending->mu);
    pending->left -= withdrawn;
    pending->done.WaitUntil(&pending->mu, absl::InfiniteFuture(), [&]() {
      pending->mu.AssertHeld();
      return pending->left == 0;
    });
    for (int i = 0; i < num_shards(); ++i) {
      if (to_ask[i] && absl::IsUnknown(pending->results[i].status())) {
        pending->results[i] = absl::DeadlineExceededError(
            absl::StrCat("shard ", i, ": pull for step >= ",
                         min_version.steps[i], " timed out"));
      }
    }
  }
  std::vector<absl::StatusOr<ParameterShard::Snapshot>> results;
  ModelVersion version = ModelVersion::AtLeast(num_shards(), 0);
  {
    MutexLock lock(&pending->mu);
    results = std::move(pending->results);
    for (const absl::Duration& w : pending->waits) {
      version.server_wait = std::max(version.server_wait, w);
    }
  }
  for (int i = 0; i < num_shards(); ++i) {
    if (to_ask[i]) RETURN_IF_ERROR(results[i].status());
  }
  bool first = true;
  for (int i = 0; i < num_shards(); ++i) {
    if (!to_ask[i]) {
      version.steps[i] = kNoPush;
      continue;
    }
    const WeightsSnapshot& snapshot = **results[i];
    const VariableLayout& layout = *snapshot.layout;
    std::vector<TensorBytes> pulled;
    for (int v = 0; v < layout.size(); ++v) {
      auto slice = placement_.slice_index.find(layout.names[v]);
      if (slice != placement_.slice_index.end() &&
          model[placement_.slices[slice->second].variable] == nullptr) {
        continue;  // not asked for (a part)
      }
      pulled.push_back(FloatTensorBytes(layout.names[v], layout.shapes[v],
                                        snapshot.weights[v].data()));
    }
    RETURN_IF_ERROR(AssembleShard(placement_, i, pulled, model));
    version.steps[i] = snapshot.step;
    RETURN_IF_ERROR(AgreeOnGeneration(first ? 0 : i, snapshot.generation,
                                      &version));
    first = false;
  }
  return version;
}

absl::StatusOr<PushResult> InProcessPsClient::Push(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckClusters());
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, gradients, &model));
  return PushModel(version, model, /*part=*/false);
}

absl::StatusOr<PushResult> InProcessPsClient::PushPart(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckClusters());
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderPart(placement_, gradients, &model));
  return PushModel(version, model, /*part=*/true);
}

absl::StatusOr<PushResult> InProcessPsClient::PushModel(
    const ModelVersion& version, absl::Span<const float* const> model,
    bool part) {
  PushResult result;
  absl::Status first_error;
  for (int i = 0; i < num_shards(); ++i) {
    const std::vector<TensorBytes> slices = ShardSlices(placement_, i, model);
    if (version.steps[i] == kNoPush || (part && slices.empty())) {
      result.shards.emplace_back().skipped = true;
      continue;
    }
    absl::StatusOr<PushReply> reply =
        part ? shards_[i]->PushPart(worker_id_, version.steps[i], slices,
                                    version.generation)
             : shards_[i]->Push(worker_id_, version.steps[i], slices,
                                version.generation);
    if (reply.ok()) {
      result.shards.push_back(*std::move(reply));
    } else {
      result.shards.emplace_back();
      first_error.Update(reply.status());
    }
  }
  RETURN_IF_ERROR(first_error);
  return result;
}

absl::StatusOr<std::vector<ShardStatus>> InProcessPsClient::Status() {
  RETURN_IF_ERROR(CheckClusters());
  std::vector<ShardStatus> out;
  for (ParameterShard* shard : shards_) out.push_back(shard->Status());
  return out;
}

absl::Status InProcessPsClient::Shutdown(absl::string_view reason) {
  RETURN_IF_ERROR(CheckClusters());
  for (ParameterShard* shard : shards_) shard->Shutdown(reason);
  return absl::OkStatus();
}

absl::Status InProcessPsClient::Rollback(int64_t label, int64_t generation) {
  RETURN_IF_ERROR(CheckClusters());
  for (ParameterShard* shard : shards_) {
    RETURN_IF_ERROR(shard->Rollback(label, generation).status());
  }
  return absl::OkStatus();
}

absl::Status InProcessPsClient::RequestCheckpoint(int64_t label, bool now) {
  RETURN_IF_ERROR(CheckClusters());
  for (ParameterShard* shard : shards_) {
    RETURN_IF_ERROR(shard->RequestCheckpoint(label, now));
  }
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace psgd
