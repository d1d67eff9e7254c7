#include "ps/client/sharded_client.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "ps/client/model_slices.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_dtype.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

// Spare Buffers kept for reuse: a worker needs one for its pushes and
// pulls, plus one per thread that pushes or pulls parts at the same time.
constexpr size_t kMaxSpareBuffers = 8;

// A random number other than 0 (which a shard reads as "not sent").
uint64_t NewIncarnation() {
  std::random_device device;
  const uint64_t n = (static_cast<uint64_t>(device()) << 32) ^ device();
  return n == 0 ? 1 : n;
}

// With several shards (`coordinated`) every shard stages a push under one
// id and shard 0 decides it when the push commits (docs/PS.md, "One
// decision per push"): the parts of a push must carry its id, and a whole
// push goes to every shard. INVALID_ARGUMENT otherwise.
absl::Status CheckCoordinatedPush(const ModelVersion& version, bool part,
                                  bool coordinated) {
  if (!coordinated) return absl::OkStatus();
  if (part && version.push_id == 0) {
    return absl::InvalidArgumentError(
        "push part: with several shards the parts of a push carry its id "
        "(ModelVersion::push_id, NewPushId)");
  }
  if (!part &&
      std::count(version.steps.begin(), version.steps.end(), kNoPush) > 0) {
    return absl::InvalidArgumentError(
        "push: with several shards a push goes to every shard (shard 0 "
        "decides it for all of them); none may be kNoPush");
  }
  return absl::OkStatus();
}

// The header of the push of `version` to shard `shard` (shard 0 carries the
// data chunk).
wire::PushRequest PushHeader(const ShardedClientOptions& options,
                             const ModelVersion& version, int shard, bool part,
                             uint64_t push_id) {
  wire::PushRequest header;
  header.set_cluster(options.cluster);
  header.set_worker_id(options.worker_id);
  header.set_step(version.steps[shard]);
  header.set_generation(version.generation);
  header.set_partial(part);
  header.set_push_id(push_id);
  if (shard == 0 && version.chunk.has_value()) {
    DataChunkRefToProto(*version.chunk, header.mutable_chunk());
  }
  return header;
}

}  // namespace

// What one push or pull keeps from call to call, per shard.
struct ShardedPsClient::Buffers {
  struct Shard {
    std::unique_ptr<ShardExchange> exchange;  // made when first needed
    // Gradients in the wire dtype while a push is sent.
    WireEncoder encoder;
    // A pulled 16-bit slice before it is converted.
    std::vector<uint16_t> pull_scratch;
  };
  std::vector<Shard> shards;
};

absl::Status ShardedPsClient::CheckChannels(
    const Placement& placement,
    const std::vector<std::unique_ptr<ShardChannel>>& channels) {
  if (static_cast<int>(channels.size()) != placement.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat(channels.size(), " shards for a placement over ",
                     placement.num_shards));
  }
  for (const auto& c : channels) {
    if (c == nullptr) return absl::InvalidArgumentError("a null shard");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardedPsClient>> ShardedPsClient::Create(
    Placement placement, std::vector<std::unique_ptr<ShardChannel>> channels,
    ShardedClientOptions options) {
  RETURN_IF_ERROR(
      Annotate(CheckChannels(placement, channels), "sharded client: "));
  return std::unique_ptr<ShardedPsClient>(new ShardedPsClient(
      std::move(placement), std::move(channels), std::move(options)));
}

ShardedPsClient::ShardedPsClient(
    Placement placement, std::vector<std::unique_ptr<ShardChannel>> channels,
    ShardedClientOptions options)
    : options_(std::move(options)),
      placement_(std::move(placement)),
      channels_(std::move(channels)),
      incarnation_(NewIncarnation()) {}

ShardedPsClient::~ShardedPsClient() = default;

std::unique_ptr<ShardedPsClient::Buffers> ShardedPsClient::TakeBuffers() {
  {
    MutexLock lock(&mu_);
    if (!spare_.empty()) {
      std::unique_ptr<Buffers> b = std::move(spare_.back());
      spare_.pop_back();
      return b;
    }
  }
  auto b = std::make_unique<Buffers>();
  b->shards.resize(num_shards());
  return b;
}

void ShardedPsClient::ReturnBuffers(std::unique_ptr<Buffers> buffers) {
  MutexLock lock(&mu_);
  if (spare_.size() < kMaxSpareBuffers) spare_.push_back(std::move(buffers));
}

template <typename Request, typename Response>
absl::Status ShardedPsClient::CallEach(absl::string_view what,
                                       Method<Request, Response> method,
                                       const std::vector<Request>& requests,
                                       std::vector<Response>* responses) {
  responses->resize(num_shards());
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  std::vector<std::unique_ptr<ShardCall>> calls;
  for (int i = 0; i < num_shards(); ++i) {
    calls.push_back(
        (channels_[i].get()->*method)(requests[i], deadline, &(*responses)[i]));
  }
  absl::Status first;
  for (int i = 0; i < num_shards(); ++i) {
    const absl::Status s = calls[i]->Await();
    if (!s.ok() && first.ok()) {
      first =
          Annotate(s, absl::StrCat(what, " to ", channels_[i]->name(), ": "));
    }
  }
  return first;
}

template <typename Request, typename Response>
absl::Status ShardedPsClient::CallAll(absl::string_view what,
                                      Method<Request, Response> method,
                                      const Request& request) {
  std::vector<Response> responses;
  return CallEach(what, method, std::vector<Request>(num_shards(), request),
                  &responses);
}

absl::Status ShardedPsClient::Initialize(
    absl::Span<const NamedConstTensorView> variables) {
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, variables, &model));
  std::vector<wire::InitializeRequest> requests(num_shards());
  for (int i = 0; i < num_shards(); ++i) {
    requests[i].set_cluster(options_.cluster);
    requests[i].set_run_dir(options_.run_dir);
    TensorBytesToProto(ShardInitialValues(placement_, i, model),
                       requests[i].mutable_variables());
  }
  std::vector<wire::InitializeResponse> responses;
  return CallEach("initialize", &ShardChannel::Initialize, requests,
                  &responses);
}

wire::JoinRequest ShardedPsClient::JoinRequest() const {
  wire::JoinRequest r;
  r.set_cluster(options_.cluster);
  r.set_worker_id(options_.worker_id);
  r.set_incarnation(incarnation_.load());
  return r;
}

absl::Status ShardedPsClient::Join() {
  return CallAll<wire::JoinRequest, wire::MembershipResponse>(
      "join", &ShardChannel::Join, JoinRequest());
}

absl::Status ShardedPsClient::Rejoin() {
  incarnation_.store(NewIncarnation());
  return Join();
}

absl::Status ShardedPsClient::RenewLease() {
  const wire::JoinRequest r = JoinRequest();
  wire::MembershipResponse response;
  const absl::Status s =
      channels_[0]
          ->Join(r, absl::Now() + options_.rpc_timeout, &response)
          ->Await();
  return Annotate(
      s, absl::StrCat("lease renewal to ", channels_[0]->name(), ": "));
}

absl::Status ShardedPsClient::Leave() { return LeaveFailed(""); }

absl::Status ShardedPsClient::LeaveFailed(absl::string_view reason) {
  wire::LeaveRequest r;
  r.set_cluster(options_.cluster);
  r.set_worker_id(options_.worker_id);
  r.set_failure(std::string(reason));
  return CallAll<wire::LeaveRequest, wire::MembershipResponse>(
      "leave", &ShardChannel::Leave, r);
}

absl::StatusOr<ModelVersion> ShardedPsClient::Pull(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  RETURN_IF_ERROR(CheckVersion(min_version, num_shards()));
  std::vector<float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, out, &model));
  return PullModel(min_version, deadline, model, /*part=*/false);
}

absl::StatusOr<ModelVersion> ShardedPsClient::PullPart(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<const NamedTensorView> out) {
  RETURN_IF_ERROR(CheckVersion(min_version, num_shards()));
  std::vector<float*> model;
  RETURN_IF_ERROR(OrderPart(placement_, out, &model));
  return PullModel(min_version, deadline, model, /*part=*/true);
}

absl::StatusOr<ModelVersion> ShardedPsClient::PullModel(
    const ModelVersion& min_version, absl::Time deadline,
    absl::Span<float* const> model, bool part) {
  std::unique_ptr<Buffers> buffers = TakeBuffers();
  // Every asked shard's pull at once: each shard sees the worker waiting in
  // its pull (which protects its lease) for the whole wait. They start under
  // interrupt_mu_, so that an InterruptPulls cancels all of them or sees
  // none and this pull refused.
  const std::vector<const float*> asked_model(model.begin(), model.end());
  std::vector<bool> asked(num_shards(), false);
  interrupt_mu_.Lock();
  if (interrupted_) {
    interrupt_mu_.Unlock();
    ReturnBuffers(std::move(buffers));
    return absl::CancelledError("pull interrupted");
  }
  pulling_.insert(buffers.get());
  for (int i = 0; i < num_shards(); ++i) {
    const std::vector<TensorBytes> slices =
        ShardSlices(placement_, i, asked_model);
    // A whole pull asks every shard, as a whole push goes to every one.
    if (part && slices.empty()) continue;
    asked[i] = true;
    wire::PullRequest r;
    r.set_cluster(options_.cluster);
    r.set_min_step(min_version.steps[i]);
    r.set_worker_id(options_.worker_id);
    r.set_generation(min_version.generation);
    if (part) {
      for (const TensorBytes& t : slices) r.add_variables(std::string(t.name));
    }
    Buffers::Shard& b = buffers->shards[i];
    if (b.exchange == nullptr) b.exchange = channels_[i]->NewExchange();
    b.exchange->StartPull(r, deadline);
  }
  interrupt_mu_.Unlock();
  absl::Status status;
  for (int i = 0; i < num_shards(); ++i) {
    if (!asked[i]) continue;
    const absl::Status s = buffers->shards[i].exchange->Await();
    if (!s.ok() && status.ok()) {
      status =
          Annotate(s, absl::StrCat("pull to ", channels_[i]->name(), ": "));
    }
  }
  {
    MutexLock lock(&interrupt_mu_);
    pulling_.erase(buffers.get());
    if (interrupted_ && absl::IsCancelled(status)) {
      status = absl::CancelledError("pull interrupted");
    }
  }
  // Each slice's bytes go straight from the channel into `model`.
  absl::StatusOr<ModelVersion> result = [&]() -> absl::StatusOr<ModelVersion> {
    RETURN_IF_ERROR(status);
    ModelVersion version = ModelVersion::AtLeast(num_shards(), kNoPush);
    bool first = true;
    for (int i = 0; i < num_shards(); ++i) {
      if (!asked[i]) continue;
      Buffers::Shard& b = buffers->shards[i];
      ShardAssembler assembler(placement_, i, model, options_.wire.weights,
                               &b.pull_scratch);
      PulledVersion pulled;
      RETURN_IF_ERROR(
          Annotate(b.exchange->ReadPull(&pulled, &assembler),
                   absl::StrCat("pull from ", channels_[i]->name(), ": ")));
      RETURN_IF_ERROR(assembler.Finish());
      version.steps[i] = pulled.step;
      RETURN_IF_ERROR(
          AgreeOnGeneration(first ? 0 : i, pulled.generation, &version));
      first = false;
      version.server_wait = std::max(version.server_wait, pulled.wait);
      if (i == 0) version.learning_rate = pulled.learning_rate;
    }
    return version;
  }();
  ReturnBuffers(std::move(buffers));
  return result;
}

void ShardedPsClient::InterruptPulls() {
  MutexLock lock(&interrupt_mu_);
  interrupted_ = true;
  for (Buffers* b : pulling_) {
    for (Buffers::Shard& shard : b->shards) {
      if (shard.exchange != nullptr) shard.exchange->Cancel();
    }
  }
}

void ShardedPsClient::ResumePulls() {
  MutexLock lock(&interrupt_mu_);
  interrupted_ = false;
}

absl::StatusOr<PushResult> ShardedPsClient::Push(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderModel(placement_, gradients, &model));
  return PushModel(version, model, /*part=*/false);
}

absl::StatusOr<PushResult> ShardedPsClient::PushPart(
    const ModelVersion& version,
    absl::Span<const NamedConstTensorView> gradients) {
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  std::vector<const float*> model;
  RETURN_IF_ERROR(OrderPart(placement_, gradients, &model));
  return PushModel(version, model, /*part=*/true);
}

absl::StatusOr<PushResult> ShardedPsClient::PushModel(
    const ModelVersion& version, absl::Span<const float* const> model,
    bool part) {
  const bool coordinated = num_shards() > 1;
  RETURN_IF_ERROR(CheckCoordinatedPush(version, part, coordinated));
  uint64_t push_id = version.push_id;
  if (coordinated && push_id == 0) push_id = NewPushId();
  // A whole push to several shards: staged on the others first, then
  // decided by shard 0 in the call that carries its own gradients
  // (DecidePush), once every other shard has staged it. A part is staged
  // everywhere at once, and committed after the last (CommitPush).
  const bool decide_last = coordinated && !part;
  std::unique_ptr<Buffers> buffers = TakeBuffers();
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  // The shards that get something: their step is not kNoPush and they hold
  // slices of the gradients (all of them do, for a whole push).
  std::vector<bool> send(num_shards(), false);
  // The requests may reference the gradients' memory; `released` tells
  // when no channel holds any of it, so that the caller may change it.
  auto released = std::make_shared<Notification>();
  std::shared_ptr<const void> in_use(
      nullptr, [released](const void*) { released->Notify(); });
  std::vector<std::vector<TensorBytes>> slices(num_shards());
  auto start = [&](int i) {
    const wire::PushRequest header =
        PushHeader(options_, version, i, part, push_id);
    Buffers::Shard& b = buffers->shards[i];
    if (b.exchange == nullptr) b.exchange = channels_[i]->NewExchange();
    b.exchange->StartPush(
        header, b.encoder.FromFloat(slices[i], options_.wire.gradients), in_use,
        deadline,
        decide_last && i == 0 ? PushMethod::kDecidePush : PushMethod::kPush);
  };
  // The shards' calls in `wave`, awaited: the first error, named by shard.
  auto await = [&](const std::vector<int>& wave) {
    absl::Status status;
    for (int i : wave) {
      const absl::Status s = buffers->shards[i].exchange->Await();
      if (!s.ok() && status.ok()) {
        status =
            Annotate(s, absl::StrCat("push to ", channels_[i]->name(), ": "));
      }
    }
    return status;
  };
  std::vector<int> first;
  for (int i = 0; i < num_shards(); ++i) {
    if (version.steps[i] == kNoPush) continue;
    slices[i] = ShardSlices(placement_, i, model);
    if (part && slices[i].empty()) continue;
    send[i] = true;
    if (!(decide_last && i == 0)) first.push_back(i);
  }
  for (int i : first) start(i);
  absl::Status status = await(first);
  // Shard 0 decides only a push every other shard has staged.
  if (decide_last && status.ok()) {
    start(0);
    status = await({0});
  }
  in_use.reset();
  if (!released->WaitForNotificationWithDeadline(absl::Now() +
                                                 absl::Seconds(30))) {
    // The transport may still read the encoder's memory: leave it be
    // rather than free it under the transport's feet (this never happens
    // with a working transport).
    static_cast<void>(buffers.release());
    return absl::InternalError(
        "push: the transport still holds the gradients' memory 30 s after "
        "the call");
  }
  absl::StatusOr<PushResult> result =
      status.ok() ? ReadPushReplies(*buffers, version, send, decide_last)
                  : absl::StatusOr<PushResult>(status);
  ReturnBuffers(std::move(buffers));
  return result;
}

absl::StatusOr<PushResult> ShardedPsClient::ReadPushReplies(
    const Buffers& buffers, const ModelVersion& version,
    const std::vector<bool>& sent, bool decided_by_shard0) const {
  PushResult result;
  if (decided_by_shard0) {
    // Every shard follows shard 0's decision.
    wire::PushResponse response;
    RETURN_IF_ERROR(buffers.shards[0].exchange->ReadPush(&response));
    ASSIGN_OR_RETURN(PushReply reply, PushReplyFromProto(response));
    for (int i = 0; i < num_shards(); ++i) {
      result.shards.push_back(reply);
      result.shards.back().skipped = version.steps[i] == kNoPush;
    }
    return result;
  }
  for (int i = 0; i < num_shards(); ++i) {
    if (!sent[i]) {
      result.shards.emplace_back().skipped = true;
      continue;
    }
    wire::PushResponse response;
    RETURN_IF_ERROR(buffers.shards[i].exchange->ReadPush(&response));
    ASSIGN_OR_RETURN(PushReply reply, PushReplyFromProto(response));
    result.shards.push_back(std::move(reply));
  }
  return result;
}

absl::StatusOr<PushResult> ShardedPsClient::CommitPush(
    const ModelVersion& version) {
  RETURN_IF_ERROR(CheckVersion(version, num_shards()));
  if (num_shards() < 2 || version.push_id == 0 || version.steps[0] == kNoPush) {
    return absl::InvalidArgumentError(
        "commit: needs several shards, a push_id and shard 0's step");
  }
  std::unique_ptr<Buffers> buffers = TakeBuffers();
  Buffers::Shard& b = buffers->shards[0];
  if (b.exchange == nullptr) b.exchange = channels_[0]->NewExchange();
  wire::CommitRequest commit;
  commit.set_cluster(options_.cluster);
  commit.set_worker_id(options_.worker_id);
  commit.set_step(version.steps[0]);
  commit.set_generation(version.generation);
  commit.set_push_id(version.push_id);
  if (version.chunk.has_value()) {
    DataChunkRefToProto(*version.chunk, commit.mutable_chunk());
  }
  b.exchange->StartCommit(commit, absl::Now() + options_.rpc_timeout);
  absl::StatusOr<PushResult> result = [&]() -> absl::StatusOr<PushResult> {
    RETURN_IF_ERROR(Annotate(
        b.exchange->Await(),
        absl::StrCat("commit of the push to ", channels_[0]->name(), ": ")));
    wire::PushResponse response;
    RETURN_IF_ERROR(b.exchange->ReadPush(&response));
    ASSIGN_OR_RETURN(PushReply reply, PushReplyFromProto(response));
    // Every shard follows shard 0's decision.
    PushResult decided;
    for (int i = 0; i < num_shards(); ++i) {
      decided.shards.push_back(reply);
      decided.shards.back().skipped = version.steps[i] == kNoPush;
    }
    return decided;
  }();
  ReturnBuffers(std::move(buffers));
  return result;
}

absl::Status ShardedPsClient::AwaitServing(absl::Time deadline) {
  const int n = num_shards();
  std::vector<std::string> last_answer(n);
  std::vector<bool> serving(n, false);
  absl::Duration backoff = absl::Milliseconds(50);
  bool logged = false;
  for (;;) {
    // One health call to every shard not serving yet, all at once; each
    // ends within 2 s, so that a shard that is not up yet is asked again.
    const absl::Time call_deadline =
        std::min(deadline, absl::Now() + absl::Seconds(2));
    std::vector<std::unique_ptr<ShardCall>> calls(n);
    std::unique_ptr<bool[]> answers(new bool[n]());
    for (int i = 0; i < n; ++i) {
      if (!serving[i]) {
        calls[i] = channels_[i]->Health(call_deadline, &answers[i]);
      }
    }
    std::vector<std::string> waiting;
    for (int i = 0; i < n; ++i) {
      if (calls[i] == nullptr) continue;
      absl::Status s = calls[i]->Await();
      if (s.ok() && answers[i]) {
        serving[i] = true;
        continue;
      }
      last_answer[i] = s.ok() ? "not serving yet" : s.ToString();
      waiting.push_back(
          absl::StrCat(channels_[i]->name(), " (", last_answer[i], ")"));
    }
    if (waiting.empty()) return absl::OkStatus();
    if (absl::Now() + backoff >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "parameter servers not serving: ", absl::StrJoin(waiting, ", ")));
    }
    if (!logged) {
      spdlog::info("waiting for parameter servers: {}",
                   absl::StrJoin(waiting, ", "));
      logged = true;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

absl::StatusOr<std::vector<ShardStatus>> ShardedPsClient::Status() {
  wire::StatusRequest r;
  r.set_cluster(options_.cluster);
  std::vector<wire::StatusResponse> responses;
  RETURN_IF_ERROR(CallEach("status", &ShardChannel::Status,
                           std::vector<wire::StatusRequest>(num_shards(), r),
                           &responses));
  std::vector<ShardStatus> out;
  for (const wire::StatusResponse& response : responses) {
    out.push_back(ShardStatusFromProto(response));
  }
  return out;
}

absl::StatusOr<std::vector<VariableSpec>> ShardedPsClient::Variables() {
  wire::StatusRequest r;
  r.set_cluster(options_.cluster);
  r.set_variables(true);
  std::vector<wire::StatusResponse> responses;
  RETURN_IF_ERROR(CallEach("status", &ShardChannel::Status,
                           std::vector<wire::StatusRequest>(num_shards(), r),
                           &responses));
  std::vector<VariableSpec> slices;
  for (const wire::StatusResponse& response : responses) {
    ShardStatus s = ShardStatusFromProto(response);
    slices.insert(slices.end(), s.variables.begin(), s.variables.end());
  }
  return VariablesOfSlices(slices);
}

absl::Status ShardedPsClient::Shutdown(absl::string_view reason) {
  wire::ShutdownRequest r;
  r.set_cluster(options_.cluster);
  r.set_reason(std::string(reason));
  // Shard 0 first: it lets the others apply its last decisions before it
  // shuts down (docs/PS.md, "One decision per push"); then the others, all
  // at once.
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  std::vector<wire::ShutdownResponse> responses(num_shards());
  RETURN_IF_ERROR(
      Annotate(channels_[0]->Shutdown(r, deadline, &responses[0])->Await(),
               absl::StrCat("shutdown to ", channels_[0]->name(), ": ")));
  std::vector<std::unique_ptr<ShardCall>> calls;
  for (int i = 1; i < num_shards(); ++i) {
    calls.push_back(channels_[i]->Shutdown(r, deadline, &responses[i]));
  }
  absl::Status first;
  for (int i = 1; i < num_shards(); ++i) {
    const absl::Status s = calls[i - 1]->Await();
    if (!s.ok() && first.ok()) {
      first =
          Annotate(s, absl::StrCat("shutdown to ", channels_[i]->name(), ": "));
    }
  }
  return first;
}

absl::Status ShardedPsClient::Rollback(int64_t label, int64_t generation) {
  wire::RollbackRequest r;
  r.set_cluster(options_.cluster);
  r.set_label(label);
  r.set_generation(generation);
  return CallAll<wire::RollbackRequest, wire::RollbackResponse>(
      "rollback", &ShardChannel::Rollback, r);
}

absl::StatusOr<DataChunk> ShardedPsClient::LeaseData(
    int64_t generation, const DataChunkRef* give_back) {
  wire::LeaseDataRequest r;
  r.set_cluster(options_.cluster);
  r.set_worker_id(options_.worker_id);
  r.set_generation(generation);
  if (give_back != nullptr)
    DataChunkRefToProto(*give_back, r.mutable_give_back());
  wire::LeaseDataResponse response;
  // Shard 0 holds the queue.
  std::unique_ptr<ShardCall> call =
      channels_[0]->LeaseData(r, absl::Now() + options_.rpc_timeout, &response);
  RETURN_IF_ERROR(
      Annotate(call->Await(),
               absl::StrCat("data lease from ", channels_[0]->name(), ": ")));
  return DataChunkFromProto(response);
}

absl::Status ShardedPsClient::RequestCheckpoint(int64_t label, bool now) {
  wire::CheckpointRequest r;
  r.set_cluster(options_.cluster);
  r.set_label(label);
  r.set_now(now);
  return CallAll<wire::CheckpointRequest, wire::CheckpointResponse>(
      "checkpoint", &ShardChannel::Checkpoint, r);
}

}  // namespace ps
}  // namespace psgd
