#include "ps/client/ucx_channel.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/wire/wire.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {

// Join or Leave over gRPC; once awaited with OK, the link follows.
class UcxShardChannel::MembershipCall final : public ShardCall {
 public:
  MembershipCall(UcxShardChannel* channel, std::unique_ptr<ShardCall> inner,
                 wire::MembershipResponse* response, bool join)
      : channel_(channel),
        inner_(std::move(inner)),
        response_(response),
        join_(join) {}

  absl::Status Await() override {
    absl::Status s = inner_->Await();
    if (s.ok() && join_) channel_->Adopt(*response_);
    if (s.ok() && !join_) channel_->Unlink();
    return s;
  }

 private:
  UcxShardChannel* const channel_;
  const std::unique_ptr<ShardCall> inner_;
  wire::MembershipResponse* const response_;
  const bool join_;
};

// Pushes and pulls over UCX while the channel is linked, over gRPC (an
// exchange of the control channel) otherwise.
class UcxShardChannel::Exchange final : public ShardExchange {
 public:
  explicit Exchange(UcxShardChannel* channel) : channel_(channel) {}

  ~Exchange() override {
    if (pending_ != nullptr) Await().IgnoreError();
  }

  void StartPush(const wire::PushRequest& header,
                 absl::Span<const TensorBytes> gradients,
                 std::shared_ptr<const void> in_use, absl::Time deadline,
                 PushMethod method) override {
    const std::optional<Link> link = channel_->CurrentLink();
    if (!link.has_value()) {
      StartGrpc()->StartPush(header, gradients, std::move(in_use), deadline,
                             method);
      return;
    }
    wire::PushRequest request = header;
    request.clear_gradients();
    std::vector<absl::string_view> ranges =
        SegmentRanges(gradients, request.mutable_gradients());
    std::vector<ucx::Segment> payload;
    int64_t bytes = 0;
    for (absl::string_view r : ranges) {
      payload.push_back({r.data(), r.size()});
      bytes += static_cast<int64_t>(r.size());
    }
    std::string serialized = request.SerializeAsString();
    bytes += static_cast<int64_t>(serialized.size());
    channel_->ucx_sent_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    StartUcx(
        *link, method == PushMethod::kDecidePush ? kUcxDecidePush : kUcxPush,
        std::move(serialized), std::move(payload), std::move(in_use), deadline);
  }

  void StartPull(const wire::PullRequest& request,
                 absl::Time deadline) override {
    const std::optional<Link> link = channel_->CurrentLink();
    if (!link.has_value()) {
      StartGrpc()->StartPull(request, deadline);
      return;
    }
    std::string serialized = request.SerializeAsString();
    channel_->ucx_sent_bytes_.fetch_add(static_cast<int64_t>(serialized.size()),
                                        std::memory_order_relaxed);
    StartUcx(*link, kUcxPull, std::move(serialized), {}, nullptr, deadline);
  }

  void StartCommit(const wire::CommitRequest& request,
                   absl::Time deadline) override {
    const std::optional<Link> link = channel_->CurrentLink();
    if (!link.has_value()) {
      StartGrpc()->StartCommit(request, deadline);
      return;
    }
    std::string serialized = request.SerializeAsString();
    channel_->ucx_sent_bytes_.fetch_add(static_cast<int64_t>(serialized.size()),
                                        std::memory_order_relaxed);
    StartUcx(*link, kUcxCommit, std::move(serialized), {}, nullptr, deadline);
  }

  absl::Status Await() override {
    if (pending_ == nullptr) {
      if (ucx_ || grpc_ == nullptr) {
        return absl::FailedPreconditionError(
            "no push, pull or commit under way");
      }
      return grpc_->Await();
    }
    std::shared_ptr<Pending> p = std::move(pending_);
    {
      // Bounded: the messenger ends every call by its deadline.
      MutexLock lock(&p->mu);
      p->done_cv.Wait(&p->mu, [&p] {
        p->mu.AssertHeld();
        return p->done;
      });
      reply_ = std::move(p->reply);
    }
    const uint64_t call = call_.exchange(0);
    if (absl::IsUnavailable(reply_.status)) channel_->MarkBroken(peer_);
    if (pull_ && (absl::IsDeadlineExceeded(reply_.status) ||
                  absl::IsCancelled(reply_.status))) {
      Withdraw(call);
    }
    if (reply_.status.ok()) {
      channel_->ucx_received_bytes_.fetch_add(
          static_cast<int64_t>(reply_.bytes.size), std::memory_order_relaxed);
    }
    return reply_.status;
  }

  void Cancel() override {
    if (const uint64_t call = call_.load(); call != 0) {
      channel_->messenger_->Cancel(call);
    }
    if (!ucx_.load() && grpc_ != nullptr) grpc_->Cancel();
  }

  absl::Status ReadPush(wire::PushResponse* response) override {
    if (!ucx_) return grpc_->ReadPush(response);
    if (!response->ParseFromArray(reply_.header.data(),
                                  static_cast<int>(reply_.header.size()))) {
      return absl::DataLossError(
          "UCX data plane: a push's or commit's answer is no PushResponse");
    }
    return absl::OkStatus();
  }

  absl::Status ReadPull(PulledVersion* version,
                        ShardAssembler* assembler) override {
    if (!ucx_) return grpc_->ReadPull(version, assembler);
    wire::PullResponse response;
    if (!response.ParseFromArray(reply_.header.data(),
                                 static_cast<int>(reply_.header.size()))) {
      return absl::DataLossError(
          "UCX data plane: a pull's answer is no PullResponse");
    }
    version->step = response.step();
    version->generation = response.generation();
    version->wait = absl::Microseconds(response.wait_micros());
    version->learning_rate = response.learning_rate();
    absl::StatusOr<std::vector<TensorBytes>> tensors =
        TensorBytesFromProto(response.variables(), reply_.payload);
    if (!tensors.ok()) {
      return absl::DataLossError(absl::StrCat(
          "UCX data plane: a pull's answer: ", tensors.status().message()));
    }
    for (const TensorBytes& t : *tensors) {
      if (absl::Status s = assembler->Add(t); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  struct Pending {
    Mutex mu;
    CondVar done_cv;
    bool done ABSL_GUARDED_BY(mu) = false;
    ucx::Reply reply ABSL_GUARDED_BY(mu);
  };

  ShardExchange* StartGrpc() {
    ucx_ = false;
    if (grpc_ == nullptr) grpc_ = channel_->control_->NewExchange();
    return grpc_.get();
  }

  // Tells the server that this side gave up on pull `call` (its deadline
  // passed, or it was cancelled), as gRPC cancels a call's server side: the
  // server takes the pull back from the shard instead of answering it when
  // its step comes. Not awaited; its answer, or its loss, changes nothing
  // here.
  void Withdraw(uint64_t call) {
    std::string header(sizeof call, '\0');
    std::memcpy(header.data(), &call, sizeof call);
    channel_->messenger_->Call(peer_, kUcxWithdraw, key_, std::move(header), {},
                               nullptr, absl::Now() + absl::Seconds(10),
                               [](ucx::Reply) {});
  }

  void StartUcx(const Link& link, uint32_t method, std::string header,
                std::vector<ucx::Segment> payload,
                std::shared_ptr<const void> keep_alive, absl::Time deadline) {
    ucx_ = true;
    pull_ = method == kUcxPull;
    key_ = link.key;
    peer_ = link.peer;
    reply_ = ucx::Reply();
    auto pending = std::make_shared<Pending>();
    pending_ = pending;
    call_.store(channel_->messenger_->Call(
        link.peer, method, link.key, std::move(header), std::move(payload),
        std::move(keep_alive), deadline, [pending](ucx::Reply reply) {
          MutexLock lock(&pending->mu);
          pending->reply = std::move(reply);
          pending->done = true;
          pending->done_cv.SignalAll();
        }));
  }

  UcxShardChannel* const channel_;  // Not owned.
  // The call under way goes over UCX (else over grpc_); read by Cancel
  // from any thread.
  std::atomic<bool> ucx_{false};
  std::unique_ptr<ShardExchange> grpc_;
  std::shared_ptr<Pending> pending_;
  std::atomic<uint64_t> call_{0};  // for Cancel; 0: none
  // The call under way over UCX: a pull's (withdrawn if it is given up on),
  // the key and peer it went with.
  bool pull_ = false;
  ucx::Key key_{};
  uint64_t peer_ = 0;
  ucx::Reply reply_;
};

UcxShardChannel::UcxShardChannel(std::unique_ptr<GrpcShardChannel> control,
                                 std::shared_ptr<ucx::Messenger> messenger,
                                 std::string host)
    : control_(std::move(control)),
      messenger_(std::move(messenger)),
      host_(std::move(host)) {}

UcxShardChannel::~UcxShardChannel() {
  MutexLock lock(&mu_);
  if (link_.has_value()) messenger_->Disconnect(link_->peer);
}

std::unique_ptr<ShardCall> UcxShardChannel::Join(
    const wire::JoinRequest& request, absl::Time deadline,
    wire::MembershipResponse* response) {
  // Without a working link, the answer's key goes to the connection Adopt
  // makes: the server lets that one take it.
  wire::JoinRequest join = request;
  std::optional<Link> link = CurrentLink();
  join.set_ucx_new_link(!link.has_value() || link->broken);
  return std::make_unique<MembershipCall>(
      this, control_->Join(join, deadline, response), response,
      /*join=*/true);
}

std::unique_ptr<ShardCall> UcxShardChannel::Leave(
    const wire::LeaveRequest& request, absl::Time deadline,
    wire::MembershipResponse* response) {
  return std::make_unique<MembershipCall>(
      this, control_->Leave(request, deadline, response), response,
      /*join=*/false);
}

void UcxShardChannel::Unlink() {
  MutexLock lock(&mu_);
  if (link_.has_value()) messenger_->Disconnect(link_->peer);
  link_.reset();
}

std::unique_ptr<ShardExchange> UcxShardChannel::NewExchange() {
  return std::make_unique<Exchange>(this);
}

bool UcxShardChannel::linked() const { return CurrentLink().has_value(); }

std::optional<UcxShardChannel::Link> UcxShardChannel::CurrentLink() const {
  MutexLock lock(&mu_);
  return link_;
}

void UcxShardChannel::MarkBroken(uint64_t peer) {
  MutexLock lock(&mu_);
  if (link_.has_value() && link_->peer == peer) link_->broken = true;
}

void UcxShardChannel::Adopt(const wire::MembershipResponse& response) {
  if (!response.has_ucx()) return;  // the server has no UCX: gRPC
  const wire::UcxDataPlane& d = response.ucx();
  ucx::Key key{};
  if (d.key().size() != key.size() || d.port() <= 0 || d.port() > 65535) {
    spdlog::warn(
        "{}: the server's UCX data plane is named with a key of {} bytes "
        "and port {}; pushes and pulls go over gRPC",
        name(), d.key().size(), d.port());
    return;
  }
  std::memcpy(key.data(), d.key().data(), key.size());
  MutexLock lock(&mu_);
  if (link_.has_value() && !link_->broken && link_->port == d.port() &&
      link_->key == key) {
    return;  // a Join that renews the lease
  }
  if (link_.has_value()) messenger_->Disconnect(link_->peer);
  link_.reset();
  absl::StatusOr<uint64_t> peer = messenger_->Connect(host_, d.port());
  if (!peer.ok()) {
    spdlog::warn("{}: no UCX link to {}:{} ({}); pushes and pulls go over gRPC",
                 name(), host_, d.port(), peer.status().ToString());
    return;
  }
  link_ = Link{*peer, key, d.port(), false};
  // The key at once, bound to this connection: the server closes a
  // connection that has presented no key within a few seconds
  // (ucx::MessengerOptions::key_deadline), and a worker may not push or pull
  // that soon. A withdrawal of call 0 (no pull has that number) is answered
  // OK and changes nothing; its answer, or its loss, is not awaited.
  {
    const uint64_t none = 0;
    std::string header(sizeof none, '\0');
    std::memcpy(header.data(), &none, sizeof none);
    messenger_->Call(*peer, kUcxWithdraw, key, std::move(header), {}, nullptr,
                     absl::Now() + absl::Seconds(10), [](ucx::Reply) {});
  }
  spdlog::info("{}: pushes and pulls over UCX ({}) to {}:{}", name(),
               messenger_->transports(), host_, d.port());
}

}  // namespace ps
}  // namespace psgd
