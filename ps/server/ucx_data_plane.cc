#include "ps/server/ucx_data_plane.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/wire/wire.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

// Threads that handle pushes: a push waits at most for the decisions on
// their way (a few seconds, ps/shard/shard.h); others keep coming meanwhile.
constexpr int kPushThreads = 4;

std::vector<ucx::Segment> Segments(
    const std::vector<absl::string_view>& ranges) {
  std::vector<ucx::Segment> segments;
  segments.reserve(ranges.size());
  for (absl::string_view r : ranges) segments.push_back({r.data(), r.size()});
  return segments;
}

}  // namespace

UcxDataPlane::UcxDataPlane(ParameterShard* shard, PullWeights* pull_weights,
                           WireDTypes wire)
    : handler_(shard, wire), pull_weights_(pull_weights) {}

absl::StatusOr<std::unique_ptr<UcxDataPlane>> UcxDataPlane::Start(
    ParameterShard* shard, PullWeights* pull_weights, WireDTypes wire,
    const std::string& transports, const std::string& host) {
  std::unique_ptr<UcxDataPlane> plane(
      new UcxDataPlane(shard, pull_weights, wire));
  ucx::MessengerOptions options;
  options.transports = transports;
  // A push the gRPC path would take fits (its PushRequest header and the
  // gradients, each aligned to 64 bytes); a longer one is refused before
  // anything is read.
  options.max_message_bytes =
      shard->options().max_message_bytes + (int64_t{1} << 20);
  absl::StatusOr<std::unique_ptr<ucx::Messenger>> messenger =
      ucx::Messenger::Create(options);
  if (!messenger.ok()) return messenger.status();
  plane->messenger_ = *std::move(messenger);
  for (int i = 0; i < kPushThreads; ++i) {
    plane->push_threads_.emplace_back([p = plane.get()] { p->PushLoop(); });
  }
  absl::StatusOr<int> port = plane->messenger_->Listen(
      host, 0,
      [p = plane.get()](ucx::Request r) { p->OnRequest(std::move(r)); },
      /*require_key=*/true,
      [p = plane.get()](uint64_t peer) { p->OnPeerGone(peer); });
  if (!port.ok()) return port.status();
  plane->port_ = *port;
  return plane;
}

UcxDataPlane::~UcxDataPlane() {
  // The push threads answer what is queued and end; then the messenger
  // stops (the shard is shut down by now: no pull is waiting).
  {
    MutexLock lock(&queue_mu_);
    stopping_ = true;
    queue_changed_.SignalAll();
  }
  for (std::thread& t : push_threads_) t.join();
  messenger_.reset();
}

absl::Status UcxDataPlane::Admit(int worker_id, bool new_link,
                                 wire::UcxDataPlane* out) {
  ucx::Key key{};
  bool known = false;
  {
    MutexLock lock(&keys_mu_);
    auto it = key_of_.find(worker_id);
    if (it != key_of_.end()) {
      key = it->second;
      known = true;
    }
  }
  if (!known) {
    absl::StatusOr<ucx::Key> made = ucx::RandomKey();
    if (!made.ok()) return made.status();
    MutexLock lock(&keys_mu_);
    // Another Join of the same worker may have made one meanwhile.
    auto it = key_of_.emplace(worker_id, *made).first;
    key = it->second;
  }
  messenger_->AcceptKey(key);
  if (new_link) messenger_->ReleaseKey(key);
  out->set_port(port_);
  out->set_key(reinterpret_cast<const char*>(key.data()), key.size());
  return absl::OkStatus();
}

void UcxDataPlane::Revoke(int worker_id) {
  ucx::Key key{};
  {
    MutexLock lock(&keys_mu_);
    auto known = key_of_.find(worker_id);
    if (known == key_of_.end()) return;
    key = known->second;
    key_of_.erase(known);
  }
  messenger_->RevokeKey(key);
}

int UcxDataPlane::WorkerOf(const ucx::Key& key) {
  MutexLock lock(&keys_mu_);
  int worker = -1;
  for (const auto& [id, known] : key_of_) {
    const bool equal = ucx::KeysEqual(known, key);
    worker = equal ? id : worker;
  }
  return worker;
}

bool UcxDataPlane::KeyIsWorkers(const ucx::Request& request,
                                absl::string_view what, int worker_id) {
  {
    // The worker the request names, then its key compared in constant time.
    MutexLock lock(&keys_mu_);
    auto it = key_of_.find(worker_id);
    if (it != key_of_.end() && ucx::KeysEqual(it->second, request.key)) {
      return true;
    }
  }
  const int keyed = WorkerOf(request.key);
  wrong_worker_++;
  messenger_->Respond(
      request.peer, request.call,
      absl::PermissionDeniedError(absl::StrCat(
          "UCX data plane: a ", what, " for worker ", worker_id,
          keyed < 0 ? " with a key no longer valid"
                    : absl::StrCat(" with worker ", keyed, "'s key"))),
      "", {}, nullptr);
  return false;
}

UcxDataPlane::Counters UcxDataPlane::counters() const {
  Counters c;
  c.pushes = served_pushes_.load();
  c.commits = served_commits_.load();
  c.pulls = served_pulls_.load();
  c.pulls_cancelled = pulls_cancelled_.load();
  c.pulls_withdrawn = pulls_withdrawn_.load();
  c.wrong_worker = wrong_worker_.load();
  c.malformed = malformed_.load();
  c.messenger = messenger_->drops();
  return c;
}

void UcxDataPlane::OnRequest(ucx::Request request) {
  switch (request.method) {
    case kUcxPush:
    case kUcxDecidePush:
    case kUcxCommit: {
      MutexLock lock(&queue_mu_);
      pushes_.push_back(std::move(request));
      queue_changed_.Signal();
      return;
    }
    case kUcxPull:
      ServePull(std::move(request));
      return;
    case kUcxWithdraw:
      ServeWithdraw(request);
      return;
    default:
      malformed_++;
      messenger_->Respond(request.peer, request.call,
                          absl::InvalidArgumentError(absl::StrCat(
                              "UCX data plane: no method ", request.method)),
                          "", {}, nullptr);
  }
}

void UcxDataPlane::PushLoop() {
  for (;;) {
    ucx::Request request;
    {
      MutexLock lock(&queue_mu_);
      queue_changed_.Wait(&queue_mu_, [this] {
        queue_mu_.AssertHeld();
        return stopping_ || !pushes_.empty();
      });
      if (pushes_.empty()) return;  // stopping
      request = std::move(pushes_.front());
      pushes_.pop_front();
    }
    if (request.method == kUcxCommit) {
      ServeCommit(request);
    } else {
      ServePush(request);
    }
  }
}

void UcxDataPlane::ServePush(const ucx::Request& request) {
  wire::PushRequest push;
  if (!push.ParseFromArray(request.header.data(),
                           static_cast<int>(request.header.size()))) {
    malformed_++;
    messenger_->Respond(
        request.peer, request.call,
        absl::InvalidArgumentError("UCX data plane: a push whose header is no "
                                   "PushRequest"),
        "", {}, nullptr);
    return;
  }
  if (!KeyIsWorkers(request, "push", push.worker_id())) return;
  wire::PushResponse response;
  absl::Status status =
      handler_.Push(push, &response, request.payload,
                    /*shared_is_private=*/true, /*keep=*/nullptr,
                    request.method == kUcxDecidePush ? PushMethod::kDecidePush
                                                     : PushMethod::kPush);
  served_pushes_++;
  messenger_->Respond(request.peer, request.call, status,
                      status.ok() ? response.SerializeAsString() : "", {},
                      nullptr);
}

void UcxDataPlane::ServeCommit(const ucx::Request& request) {
  wire::CommitRequest commit;
  if (!request.payload.empty() ||
      !commit.ParseFromArray(request.header.data(),
                             static_cast<int>(request.header.size()))) {
    malformed_++;
    messenger_->Respond(
        request.peer, request.call,
        absl::InvalidArgumentError("UCX data plane: a commit whose header is "
                                   "no CommitRequest (or with a payload)"),
        "", {}, nullptr);
    return;
  }
  if (!KeyIsWorkers(request, "commit", commit.worker_id())) return;
  wire::PushResponse response;
  absl::Status status = handler_.Commit(commit, &response);
  served_commits_++;
  messenger_->Respond(request.peer, request.call, status,
                      status.ok() ? response.SerializeAsString() : "", {},
                      nullptr);
}

void UcxDataPlane::ServePull(ucx::Request request) {
  wire::PullRequest pull;
  if (!pull.ParseFromArray(request.header.data(),
                           static_cast<int>(request.header.size())) ||
      pull.has_shared_memory()) {
    malformed_++;
    messenger_->Respond(
        request.peer, request.call,
        absl::InvalidArgumentError("UCX data plane: a pull whose header is no "
                                   "PullRequest (or names shared memory)"),
        "", {}, nullptr);
    return;
  }
  if (!KeyIsWorkers(request, "pull", pull.worker_id())) return;
  served_pulls_++;
  const absl::Time arrived = absl::Now();
  std::vector<std::string> variables(pull.variables().begin(),
                                     pull.variables().end());
  const uint64_t peer = request.peer;
  const uint64_t call = request.call;
  ParameterShard* shard = handler_.shard();
  auto slot = std::make_shared<PullSlot>();
  slot->call = call;
  // Answered now or from the thread that completes the step; the messenger
  // outlives every answer (a pull still waiting when it stops is answered
  // into the void: Respond finds no peer). One whose peer goes first is
  // taken back from the shard (OnPeerGone).
  const uint64_t ticket = handler_.Pull(
      pull, [this, shard, arrived, peer, call, slot,
             variables = std::move(variables)](
                absl::StatusOr<ParameterShard::Snapshot> snapshot) {
        {
          MutexLock lock(&waiting_mu_);
          slot->answered = true;
          auto it = waiting_.find(peer);
          if (it != waiting_.end()) {
            it->second.erase(slot.get());
            if (it->second.empty()) waiting_.erase(it);
          }
        }
        if (!snapshot.ok()) {
          messenger_->Respond(peer, call, snapshot.status(), "", {}, nullptr);
          return;
        }
        const WeightsSnapshot& s = **snapshot;
        absl::StatusOr<std::vector<int>> selected = s.layout->Select(variables);
        if (!selected.ok()) {
          messenger_->Respond(
              peer, call,
              Annotate(
                  selected.status(),
                  absl::StrCat("shard ", shard->options().shard_index, ": ")),
              "", {}, nullptr);
          return;
        }
        wire::PullResponse header;
        header.set_step(s.step);
        header.set_wait_micros(
            absl::ToInt64Microseconds(absl::Now() - arrived));
        header.set_generation(s.generation);
        header.set_learning_rate(s.learning_rate);
        PullWeights::Tensors t = pull_weights_->Get(*snapshot, *selected);
        std::vector<ucx::Segment> payload =
            Segments(SegmentRanges(t.tensors, header.mutable_variables()));
        messenger_->Respond(peer, call, absl::OkStatus(),
                            header.SerializeAsString(), std::move(payload),
                            std::move(t.keep_alive));
      });
  if (ticket == 0) return;  // answered already
  MutexLock lock(&waiting_mu_);
  if (slot->answered) return;
  slot->ticket = ticket;
  waiting_[peer].insert(slot.get());
}

void UcxDataPlane::ServeWithdraw(const ucx::Request& request) {
  uint64_t call = 0;
  if (request.header.size() != sizeof call) {
    malformed_++;
    messenger_->Respond(
        request.peer, request.call,
        absl::InvalidArgumentError(absl::StrCat(
            "UCX data plane: a withdrawal's header is ", request.header.size(),
            " bytes, not the 8 of a call number")),
        "", {}, nullptr);
    return;
  }
  std::memcpy(&call, request.header.data(), sizeof call);
  // Only the pulls of the connection the withdrawal came over, which its
  // key is bound to (ps/ucx/messenger.h): one worker cannot withdraw
  // another's.
  uint64_t ticket = 0;
  {
    MutexLock lock(&waiting_mu_);
    auto it = waiting_.find(request.peer);
    if (it != waiting_.end()) {
      for (auto slot = it->second.begin(); slot != it->second.end(); ++slot) {
        if ((*slot)->call != call) continue;
        ticket = (*slot)->ticket;
        it->second.erase(slot);
        if (it->second.empty()) waiting_.erase(it);
        break;
      }
    }
  }
  // A pull the shard answers meanwhile is answered (its reply then finds no
  // call under way on the worker, which counts it); one it gives back is
  // not answered at all.
  if (ticket != 0 && handler_.shard()->CancelPull(ticket)) pulls_withdrawn_++;
  messenger_->Respond(request.peer, request.call, absl::OkStatus(), "", {},
                      nullptr);
}

void UcxDataPlane::OnPeerGone(uint64_t peer) {
  std::vector<uint64_t> tickets;
  {
    MutexLock lock(&waiting_mu_);
    auto it = waiting_.find(peer);
    if (it == waiting_.end()) return;
    for (PullSlot* slot : it->second) tickets.push_back(slot->ticket);
    waiting_.erase(it);
  }
  // A pull the shard answers meanwhile is answered into the void; one it
  // gives back is not answered at all (CancelPull decides).
  for (uint64_t ticket : tickets) {
    if (handler_.shard()->CancelPull(ticket)) pulls_cancelled_++;
  }
}

}  // namespace ps
}  // namespace psgd
