// ParameterShard, the thread-safe front of the ShardCore: each request takes
// the mutex for its core call, does outside it what needs no lock, and
// answers the pulls the call made ready after it.
#include "ps/shard/shard.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

// ShardOptions::bulk_threads, 0 taken as the machine's cores, at most 4.
int BulkThreads(int option) { return option > 0 ? option : MachineThreads(4); }

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterShard>> ParameterShard::Create(
    const ShardOptions& options) {
  RETURN_IF_ERROR(ValidateShardOptions(options));
  std::unique_ptr<ParameterShard> shard(new ParameterShard(options));
  if (options.data_queue_on) {
    MutexLock lock(&shard->mu_);
    RETURN_IF_ERROR(shard->core_.OpenQueue());
  }
  // The other shards keep a ledger of the chunks they applied too.
  if (!options.ledger_file.empty()) {
    ASSIGN_OR_RETURN(shard->ledger_,
                     Ledger::Open(options.ledger_file, shard->name_));
    MutexLock lock(&shard->mu_);
    shard->core_.set_ledger(shard->ledger_.get());
  }
  if (!options.checkpoint.dir.empty()) {
    RETURN_IF_ERROR(shard->OpenCheckpoints());
  }
  return shard;
}

ParameterShard::ParameterShard(const ShardOptions& options)
    : options_(options),
      name_(absl::StrCat("shard ", options.shard_index)),
      bulk_(std::make_unique<ThreadPool>(BulkThreads(options.bulk_threads))),
      // Shard 0 of several shards carries its decisions to the others.
      relay_(options.num_shards > 1 && options.shard_index == 0
                 ? std::make_unique<DecisionRelay>(options.num_shards,
                                                   /*generation=*/1)
                 : nullptr),
      core_(options_, name_, bulk_.get(), relay_.get()) {}

ParameterShard::~ParameterShard() {
  Shutdown("the shard object is destroyed");
  relay_.reset();  // its senders stop; nothing publishes after Shutdown
}

absl::Status ParameterShard::CheckCluster(absl::string_view cluster) const {
  if (cluster == options_.cluster_name) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("request for cluster '", cluster, "' reached ", name_,
                   " of cluster '", options_.cluster_name, "'"));
}

std::shared_ptr<const VariableLayout> ParameterShard::Layout() const {
  MutexLock lock(&mu_);
  return core_.layout();
}

std::vector<absl::Status> ParameterShard::CheckPushedTensors(
    absl::Span<const TensorBytes> tensors,
    absl::Span<float* const> copy_to) const {
  return ps::CheckPushedTensors(tensors, copy_to, bulk_pool(),
                                [this]() { return Layout(); });
}

absl::Status ParameterShard::CheckKnownShapes(
    absl::Span<const TensorBytes> tensors) const {
  return ps::CheckKnownShapes(tensors, Layout().get());
}

absl::StatusOr<ParameterShard::InitializeReply> ParameterShard::Initialize(
    absl::Span<const TensorBytes> variables) {
  RETURN_IF_ERROR(
      Annotate(CheckNoLocalStatistics(options_.batch_norm_statistics, variables,
                                      "initialize"),
               name_ + ": "));
  // Checked and copied outside the lock; installed under it.
  absl::StatusOr<std::unique_ptr<VariableStore>> store =
      VariableStore::Create(variables);
  Ready ready;
  absl::StatusOr<InitializeReply> reply;
  {
    MutexLock lock(&mu_);
    reply = core_.Initialize(variables, std::move(store), &ready);
  }
  RunReady(&ready);
  return reply;
}

uint64_t ParameterShard::PullAsync(int64_t min_step, int worker_id,
                                   PullDone done, int64_t generation) {
  absl::StatusOr<Snapshot> answer;
  {
    MutexLock lock(&mu_);
    const uint64_t ticket =
        core_.Pull(min_step, worker_id, generation, &done, &answer);
    if (ticket != 0) return ticket;
  }
  done(std::move(answer));
  return 0;
}

bool ParameterShard::CancelPull(uint64_t ticket) {
  MutexLock lock(&mu_);
  return core_.CancelPull(ticket);
}

absl::StatusOr<ParameterShard::Snapshot> ParameterShard::Pull(
    int64_t min_step, int worker_id, absl::Time deadline, int64_t generation) {
  struct Result {
    Notification done;
    absl::StatusOr<Snapshot> value;
  };
  auto result = std::make_shared<Result>();
  const uint64_t ticket = PullAsync(
      min_step, worker_id,
      [result](absl::StatusOr<Snapshot> value) {
        result->value = std::move(value);
        result->done.Notify();
      },
      generation);
  if (!result->done.WaitForNotificationWithDeadline(deadline)) {
    if (CancelPull(ticket)) {
      MutexLock lock(&mu_);
      return absl::DeadlineExceededError(
          absl::StrCat(name_, ": pull for step >= ", min_step,
                       " timed out; the shard is at step ", core_.step(),
                       core_.initialized() ? "" : " and not initialized"));
    }
    result->done.WaitForNotification();  // done is running right now
  }
  return std::move(result->value);
}

absl::StatusOr<PushReply> ParameterShard::Push(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id,
    std::shared_ptr<const void> keep) {
  if (coordinated()) {
    return Stage(worker_id, step, gradients, generation, chunk, push_id,
                 /*whole=*/true, std::move(keep));
  }
  return DecideWhole(worker_id, step, gradients, generation, chunk, push_id);
}

absl::StatusOr<PushReply> ParameterShard::PushPart(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id,
    std::shared_ptr<const void> keep) {
  return Stage(worker_id, step, gradients, generation, chunk, push_id,
               /*whole=*/false, std::move(keep));
}

absl::StatusOr<PushReply> ParameterShard::DecideWhole(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id) {
  // The scan for NaN, Inf and values too large reads the whole gradient: no
  // lock for it.
  const std::vector<float*> no_copies(gradients.size(), nullptr);
  absl::Status status = FirstNotOk(CheckPushedTensors(gradients, no_copies));
  PushReply reply;
  Ready ready;
  {
    MutexLock lock(&mu_);
    if (status.ok()) {
      status = core_.DecideWhole(worker_id, step, gradients, generation, chunk,
                                 push_id, &reply, &ready);
    } else {
      core_.CountRefused();
    }
  }
  RunReady(&ready);
  if (!status.ok()) {
    return Annotate(status, absl::StrCat(name_, ": push from worker ",
                                         worker_id, " for step ", step, ": "));
  }
  return reply;
}

absl::StatusOr<PushReply> ParameterShard::Stage(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk, uint64_t push_id, bool whole,
    std::shared_ptr<const void> keep) {
  // Checked and copied outside the lock: the scan and the copy read the
  // whole part, while other workers' parts are decided.
  absl::Status status;
  if (gradients.empty() && !whole) {
    status = absl::InvalidArgumentError("the part carries no gradient");
  }
  // One pass over the part: the check copies what it reads (no zeroing
  // first), or, where `keep` holds the request's memory, only reads it and
  // the stage keeps the request (no copy).
  std::vector<float*> copy_to;
  std::vector<StagedGradient> floats = StagingFor(gradients, keep, &copy_to);
  if (status.ok()) status = FirstNotOk(CheckPushedTensors(gradients, copy_to));
  PushReply reply;
  Ready ready;
  {
    MutexLock lock(&mu_);
    if (status.ok()) {
      status = core_.Stage(worker_id, step, gradients, &floats, generation,
                           chunk, push_id, whole, &reply, &ready);
    } else {
      core_.CountRefused();
    }
  }
  RunReady(&ready);
  if (!status.ok()) {
    return Annotate(
        status,
        absl::StrCat(name_, whole ? ": push" : ": push part", " from worker ",
                     worker_id, " for step ", step, ": "));
  }
  return reply;
}

absl::StatusOr<PushReply> ParameterShard::Commit(int worker_id, int64_t step,
                                                 int64_t generation,
                                                 uint64_t push_id,
                                                 const DataChunkRef* chunk) {
  AwaitRelayBacklog();
  PushReply reply;
  Ready ready;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    status = core_.Commit(worker_id, step, generation, push_id, chunk, &reply,
                          &ready);
  }
  RunReady(&ready);
  if (!status.ok()) {
    return Annotate(status,
                    absl::StrCat(name_, ": commit of worker ", worker_id,
                                 "'s push for step ", step, ": "));
  }
  return reply;
}

absl::StatusOr<PushReply> ParameterShard::DecidePush(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, uint64_t push_id, const DataChunkRef* chunk) {
  absl::Status refused;
  if (!coordinated() || follower()) {
    refused = absl::FailedPreconditionError(
        "only shard 0 of a cluster of several shards decides pushes");
  } else if (push_id == 0) {
    refused = absl::InvalidArgumentError(
        "a push to decide needs the push_id the other shards staged it "
        "under");
  }
  if (!refused.ok()) {
    {
      MutexLock lock(&mu_);
      core_.CountRefused();
    }
    return Annotate(
        refused, absl::StrCat(name_, ": push to decide from worker ", worker_id,
                              " for step ", step, ": "));
  }
  AwaitRelayBacklog();
  return DecideWhole(worker_id, step, gradients, generation, chunk, push_id);
}

void ParameterShard::AwaitRelayBacklog() {
  // Flow control: the other shards keep every push until its decision
  // reaches them; a commit waits while too many decisions are on their way
  // (async workers outrun the relay). A shard that does not take them (down,
  // restarting) is not waited for beyond a few seconds.
  if (relay_ != nullptr &&
      !relay_->AwaitBacklogAtMost(kMaxDecisionBacklog,
                                  absl::Now() + absl::Seconds(5))) {
    spdlog::warn("{}: {} decisions have not reached every shard for 5 s", name_,
                 relay_->backlog());
  }
}

absl::StatusOr<int64_t> ParameterShard::ApplyDecisions(
    int64_t generation, absl::Span<const Decision> decisions) {
  Ready ready;
  absl::Status status;
  int64_t applied = 0;
  {
    MutexLock lock(&mu_);
    status = core_.ApplyDecisions(generation, decisions, &ready, &applied);
  }
  RunReady(&ready);
  if (!status.ok()) return status;
  return applied;
}

void ParameterShard::ConnectFollowers(DecisionRelay::Deliver deliver) {
  if (relay_ != nullptr) relay_->set_deliver(std::move(deliver));
}

bool ParameterShard::AwaitDecisionsDelivered(absl::Time deadline) {
  return relay_ == nullptr || relay_->AwaitDelivered(deadline);
}

void ParameterShard::RunReady(Ready* ready) {
  // The ledger first: a worker that gets a step's weights finds the step's
  // lines in the file.
  if (ledger_ != nullptr) ledger_->Write();
  for (auto& [done, value] : *ready) done(std::move(value));
  ready->clear();
}

absl::StatusOr<ParameterShard::MembershipReply> ParameterShard::Join(
    int worker_id, uint64_t incarnation) {
  MutexLock lock(&mu_);
  return core_.Join(worker_id, incarnation);
}

std::vector<VariableSpec> ParameterShard::Variables() const {
  MutexLock lock(&mu_);
  return core_.Variables();
}

absl::StatusOr<ParameterShard::MembershipReply> ParameterShard::Leave(
    int worker_id, absl::string_view failure) {
  Ready ready;
  absl::StatusOr<MembershipReply> reply;
  {
    MutexLock lock(&mu_);
    reply = core_.Leave(worker_id, failure, &ready);
  }
  RunReady(&ready);
  return reply;
}

std::vector<int> ParameterShard::ExpireWorkers(absl::Time now) {
  Ready ready;
  std::vector<int> expired;
  {
    MutexLock lock(&mu_);
    expired = core_.ExpireWorkers(now, &ready);
  }
  RunReady(&ready);
  return expired;
}

absl::StatusOr<DataChunk> ParameterShard::LeaseData(
    int worker_id, int64_t generation, const DataChunkRef* give_back) {
  absl::StatusOr<DataChunk> chunk;
  {
    MutexLock lock(&mu_);
    chunk = core_.LeaseData(worker_id, generation, give_back);
  }
  if (!chunk.ok()) {
    return Annotate(chunk.status(),
                    absl::StrCat(name_, ": data for worker ", worker_id, ": "));
  }
  return chunk;
}

std::optional<DataQueuePosition> ParameterShard::DataPosition() const {
  MutexLock lock(&mu_);
  return core_.DataPosition();
}

ParameterShard::Snapshot ParameterShard::LatestWeights() const {
  MutexLock lock(&mu_);
  return core_.LatestWeights();
}

ShardStatus ParameterShard::Status() const {
  MutexLock lock(&mu_);
  return core_.Status();
}

int64_t ParameterShard::MaxTensorAreaBytes(int64_t header,
                                           int64_t align) const {
  MutexLock lock(&mu_);
  return core_.MaxTensorAreaBytes(header, align);
}

std::vector<float> ParameterShard::CopySlot(absl::string_view name,
                                            int index) const {
  MutexLock lock(&mu_);
  return core_.CopySlot(name, index);
}

absl::Status ParameterShard::OpenCheckpoints() {
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointStore> store,
                   ShardCheckpointing::OpenStore(options_));
  MutexLock lock(&mu_);
  const absl::Status opened = core_.OpenCheckpoints(std::move(store));
  restore_report_ = core_.restore_report();
  return opened;
}

std::vector<CompleteCheckpointInfo> ParameterShard::CompleteCheckpoints()
    const {
  CheckpointStore* store = nullptr;
  {
    MutexLock lock(&mu_);
    store = core_.checkpoint_store();
  }
  if (store == nullptr) return {};
  return store->ListComplete();
}

bool ParameterShard::agreeing() const {
  MutexLock lock(&mu_);
  return core_.agreeing();
}

absl::Status ParameterShard::RestoreAgreed(int64_t label) {
  CheckpointStore* store = nullptr;
  {
    MutexLock lock(&mu_);
    bool done = false;
    RETURN_IF_ERROR(core_.StartRestoreAgreed(label, &done));
    if (done) return absl::OkStatus();
    store = core_.checkpoint_store();
  }
  // The file is read without the lock.
  absl::StatusOr<ShardCheckpoint> c = store->Read(label);
  if (!c.ok()) {
    return Annotate(c.status(), absl::StrCat(name_,
                                             ": restoring the agreed "
                                             "checkpoint step-",
                                             label, ": "));
  }
  MutexLock lock(&mu_);
  const absl::Status restored = core_.RestoreAgreed(*c, label);
  restore_report_ = core_.restore_report();
  return restored;
}

absl::Status ParameterShard::RequestCheckpoint(int64_t label, bool now) {
  MutexLock lock(&mu_);
  return core_.RequestCheckpoint(label, now);
}

void ParameterShard::FlushCheckpoints() {
  CheckpointWriter* writer = nullptr;
  {
    MutexLock lock(&mu_);
    writer = core_.checkpoint_writer();
  }
  if (writer != nullptr) writer->Flush();
}

absl::StatusOr<ParameterShard::RollbackReply> ParameterShard::Rollback(
    int64_t label, int64_t generation) {
  const std::string context =
      absl::StrCat(name_, ": rollback to checkpoint step-", label,
                   " (generation ", generation, "): ");
  CheckpointStore* store = nullptr;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(std::optional<RollbackReply> reply,
                     core_.StartRollback(label, generation, context));
    if (reply.has_value()) return *reply;
    store = core_.checkpoint_store();
  }
  // The file is read without the lock.
  absl::StatusOr<ShardCheckpoint> c = store->Read(label);
  if (!c.ok()) return Annotate(c.status(), context);
  Ready ready;
  absl::StatusOr<RollbackReply> reply;
  {
    MutexLock lock(&mu_);
    reply = core_.FinishRollback(*c, label, generation, context, &ready);
  }
  RunReady(&ready);
  return reply;
}

void ParameterShard::Shutdown(absl::string_view reason) {
  // Shard 0 lets the other shards apply its last decisions first (the
  // client shuts shard 0 down before the others).
  if (relay_ != nullptr) relay_->AwaitDelivered(absl::Now() + absl::Seconds(5));
  Ready ready;
  {
    MutexLock lock(&mu_);
    if (!core_.Shutdown(reason, &ready)) return;
    shutdown_cv_.SignalAll();
  }
  RunReady(&ready);
}

bool ParameterShard::AwaitShutdown(absl::Time deadline) const {
  MutexLock lock(&mu_);
  return shutdown_cv_.WaitUntil(&mu_, deadline, [this]() {
    mu_.AssertHeld();
    return core_.shut_down();
  });
}

}  // namespace ps
}  // namespace psgd
