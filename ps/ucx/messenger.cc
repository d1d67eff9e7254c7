#include "ps/ucx/messenger.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace ucx {
namespace {

// Active message ids.
constexpr unsigned kRequestAm = 1;
constexpr unsigned kReplyAm = 2;
constexpr uint32_t kRequestMagic = 0x70736751;  // "psgQ"
constexpr uint32_t kReplyMagic = 0x70736752;    // "psgR"

// The AM headers, as laid out in memory (both ends are little-endian
// machines running this code).
struct RequestHead {
  uint32_t magic;
  uint32_t method;
  uint64_t call;
  uint8_t key[16];
  uint64_t header_size;  // the caller's header, at the start of the data
};
static_assert(sizeof(RequestHead) == 40, "RequestHead has padding");

struct ReplyHead {
  uint32_t magic;
  int32_t code;  // absl::StatusCode
  uint64_t call;
  uint64_t message_size;  // the status message, at the start of the data
  uint64_t header_size;   // then the caller's header
};
static_assert(sizeof(ReplyHead) == 32, "ReplyHead has padding");

// The messenger's own defaults for UCX's tcp transport (Start says why).
const std::pair<std::string, std::string> kTcpDefaults[] = {
    {"TCP_TX_SEG_SIZE", "1M"}, {"TCP_RX_SEG_SIZE", "1M"}};

absl::Status FromUcs(ucs_status_t status, absl::string_view what) {
  const std::string text = absl::StrCat(what, ": ", ucs_status_string(status));
  switch (status) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_CANCELED:
      return absl::CancelledError(text);
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
      return absl::DeadlineExceededError(text);
    case UCS_ERR_INVALID_PARAM:
      return absl::InvalidArgumentError(text);
    default:
      return absl::UnavailableError(text);
  }
}

// The buffers ReturnBuffer keeps: the smallest kept one that holds a
// request and is at most twice its size is taken, else a new one.
class BufferPool {
 public:
  char* Take(size_t needed, size_t* capacity) {
    if (needed >= kMinPooledBuffer) {
      MutexLock lock(&mu_);
      auto best = kept_.end();
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        if (it->second >= needed && it->second / 2 <= needed &&
            (best == kept_.end() || it->second < best->second)) {
          best = it;
        }
      }
      if (best != kept_.end()) {
        char* p = best->first;
        *capacity = best->second;
        kept_bytes_ -= best->second;
        kept_.erase(best);
        return p;
      }
      ++allocated_;
    }
    *capacity = needed;
    return new char[needed];
  }

  void Give(char* p, size_t capacity) {
    if (capacity >= kMinPooledBuffer) {
      MutexLock lock(&mu_);
      if (kept_bytes_ + capacity <= kMaxPooledBytes) {
        kept_.emplace_back(p, capacity);
        kept_bytes_ += capacity;
        return;
      }
    }
    delete[] p;
  }

  int64_t allocated() {
    MutexLock lock(&mu_);
    return allocated_;
  }

 private:
  Mutex mu_;
  std::vector<std::pair<char*, size_t>> kept_ ABSL_GUARDED_BY(mu_);
  size_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t allocated_ ABSL_GUARDED_BY(mu_) = 0;
};

BufferPool& Buffers() {
  static BufferPool* pool = new BufferPool();  // never destroyed
  return *pool;
}

// `size` bytes whose byte `before` (where the payload starts) lies at a
// multiple of kPayloadAlign.
Bytes NewBytes(size_t size, size_t before) {
  Bytes bytes;
  size_t capacity = 0;
  char* p = Buffers().Take(size + kPayloadAlign, &capacity);
  bytes.data = std::unique_ptr<char[], ReturnBuffer>(p, ReturnBuffer{capacity});
  const auto base = reinterpret_cast<uintptr_t>(bytes.data.get());
  bytes.skip =
      (kPayloadAlign - (base + before) % kPayloadAlign) % kPayloadAlign;
  bytes.size = size;
  return bytes;
}

// What a send holds until UCX has let go of its memory.
struct SendState {
  std::string head;    // the AM header
  std::string prefix;  // status message and/or caller's header
  std::vector<Segment> payload;
  std::vector<ucp_dt_iov_t> iov;
  std::shared_ptr<const void> keep_alive;
  void* owner = nullptr;  // the Messenger::Impl that sent it
  uint64_t call = 0;      // a request's call, to end it when the send fails
};

// The rate limit on UCX's log (messenger.h): a window of one second, the
// lines let through in it, and those held back.
std::atomic<int64_t> ucx_log_window{0};  // seconds since the epoch
std::atomic<int> ucx_log_in_window{0};
std::atomic<int64_t> ucx_log_held{0};        // in the current window
std::atomic<int64_t> ucx_log_suppressed{0};  // in all

ucs_log_func_rc_t RateLimitUcxLog(const char*, unsigned, const char*,
                                  ucs_log_level_t,
                                  const ucs_log_component_config_t*,
                                  const char*, va_list) {
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  int64_t window = ucx_log_window.load();
  if (window != now && ucx_log_window.compare_exchange_strong(window, now)) {
    ucx_log_in_window = 0;
    const int64_t held = ucx_log_held.exchange(0);
    if (held > 0) {
      spdlog::warn(
          "UCX: {} log lines held back in the last second (at most {} a "
          "second are written)",
          held, kUcxLogLinesPerSecond);
    }
  }
  if (ucx_log_in_window.fetch_add(1) < kUcxLogLinesPerSecond) {
    return UCS_LOG_FUNC_RC_CONTINUE;  // UCX's own handler writes it
  }
  ucx_log_held++;
  ucx_log_suppressed++;
  return UCS_LOG_FUNC_RC_STOP;
}

void InstallUcxLogLimit() {
  static std::once_flag once;
  std::call_once(once, [] { ucs_log_push_handler(&RateLimitUcxLog); });
}

// UCX's tcp transport sends an active message in segments of 8 KB by
// default, a system call and a header each: with 1 MB segments a shard's
// megabytes move as fast as a plain socket's (docs/PERFORMANCE.md, "The
// data plane"). A transport's settings are read from the environment when
// UCX opens it (ucp_config_modify keeps them but does not pass them on),
// so the defaults go there, unless the user has set either (UCX refuses
// a receive segment smaller than the send segment).
void SetTcpDefaultsUnlessUserSet() {
  for (const auto& [name, value] : kTcpDefaults) {
    if (std::getenv(absl::StrCat("UCX_", name).c_str()) != nullptr) return;
  }
  for (const auto& [name, value] : kTcpDefaults) {
    setenv(absl::StrCat("UCX_", name).c_str(), value.c_str(),
           /*overwrite=*/0);
  }
}

// UCX's settings with options.transports and options.settings applied; the
// caller releases it (ucp_config_release). INVALID_ARGUMENT naming a
// setting UCX refuses.
absl::StatusOr<ucp_config_t*> ReadUcxConfig(const MessengerOptions& options) {
  ucp_config_t* config = nullptr;
  const ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return FromUcs(status, "UCX: reading its settings");
  auto modify = [&](const std::string& name,
                    const std::string& value) -> absl::Status {
    const ucs_status_t s =
        ucp_config_modify(config, name.c_str(), value.c_str());
    if (s != UCS_OK) {
      return absl::InvalidArgumentError(absl::StrCat("UCX refused the setting ",
                                                     name, "=", value, ": ",
                                                     ucs_status_string(s)));
    }
    return absl::OkStatus();
  };
  absl::Status set = absl::OkStatus();
  if (!options.transports.empty()) set = modify("TLS", options.transports);
  for (const auto& [name, value] : options.settings) {
    if (!set.ok()) break;
    set = modify(name, value);
  }
  if (!set.ok()) {
    ucp_config_release(config);
    return set;
  }
  return config;
}

}  // namespace

void ReturnBuffer::operator()(char* p) const {
  if (p != nullptr) Buffers().Give(p, capacity);
}

int64_t PooledBuffersAllocated() { return Buffers().allocated(); }

int64_t UcxLogLinesSuppressed() { return ucx_log_suppressed.load(); }

absl::StatusOr<Key> RandomKey() {
  Key key;
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(reinterpret_cast<char*>(key.data()), key.size())) {
    return absl::UnavailableError("RandomKey: cannot read /dev/urandom");
  }
  return key;
}

bool KeysEqual(const Key& a, const Key& b) {
  // Volatile: the compiler may not turn the loop into a memcmp that stops at
  // the first difference.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  }
  return diff == 0;
}

class Messenger::Impl {
 public:
  Impl() = default;
  ~Impl() { Stop(); }

  absl::Status Start(const MessengerOptions& options);
  void Stop();

  // Runs `fn` on the messenger's thread, soon.
  void Post(std::function<void()> fn) {
    {
      MutexLock lock(&mu_);
      posted_.push_back(std::move(fn));
    }
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof one);
    (void)ignored;
  }
  // Runs `fn` on the messenger's thread and waits for it (at once when
  // called there, from a handler or a call's `done`).
  template <typename T>
  T RunAndWait(std::function<T()> fn) {
    if (std::this_thread::get_id() == thread_.get_id()) return fn();
    Mutex done_mu;
    CondVar done_cv;
    bool done = false;
    T result{};
    Post([&] {
      T value = fn();
      MutexLock lock(&done_mu);
      result = std::move(value);
      done = true;
      done_cv.SignalAll();
    });
    MutexLock lock(&done_mu);
    done_cv.WaitUntil(
        &done_mu, absl::InfiniteFuture(),
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(done_mu) { return done; });
    return result;
  }

  uint64_t NextId() { return next_id_.fetch_add(1) + 1; }

  // The request and reply handlers on worker_ (Start, before the thread).
  absl::Status SetAmHandlers();

  // On the messenger's thread from here on.
  absl::StatusOr<int> ListenHere(const std::string& address, int port);
  absl::StatusOr<uint64_t> ConnectHere(const std::string& host, int port);
  void StartCall(uint64_t call, uint64_t peer, uint32_t method, const Key& key,
                 std::string header, std::vector<Segment> payload,
                 std::shared_ptr<const void> keep_alive, absl::Time deadline,
                 CallDone done);
  void SendReply(uint64_t peer, uint64_t call, const absl::Status& status,
                 std::string header, std::vector<Segment> payload,
                 std::shared_ptr<const void> keep_alive);
  void EndCall(uint64_t call, Reply reply);
  void ClosePeer(uint64_t peer, const absl::Status& why);

  Handler handler_;
  PeerGone peer_gone_;
  bool require_key_ = true;
  // The accepted keys, each with the peer it is bound to (0: none yet).
  // Searched with KeysEqual, every entry each time (FindKey): no lookup
  // keyed by the secret.
  struct AcceptedKey {
    Key key;
    uint64_t peer = 0;
  };
  std::vector<AcceptedKey> keys_;
  // The accepted entry equal to `key`, or nullptr; every entry is compared.
  AcceptedKey* FindKey(const Key& key) {
    AcceptedKey* found = nullptr;
    for (AcceptedKey& entry : keys_) {
      const bool equal = KeysEqual(entry.key, key);
      found = equal ? &entry : found;
    }
    return found;
  }

  std::atomic<int64_t> bad_key_{0};
  std::atomic<int64_t> other_connection_{0};
  std::atomic<int64_t> malformed_{0};
  std::atomic<int64_t> unknown_call_{0};
  std::atomic<int64_t> receive_failed_{0};
  std::atomic<int64_t> unkeyed_closed_{0};
  std::atomic<int64_t> unkeyed_evicted_{0};
  std::atomic<int64_t> too_large_{0};
  int64_t max_message_bytes_ = int64_t{256} << 20;

  absl::Duration key_deadline_ = absl::Seconds(5);
  int max_unkeyed_ = 64;

 private:
  struct Peer {
    ucp_ep_h ep = nullptr;
    bool accepted = false;  // connected to the listener (not Connect)
    // An accepted peer: when it connected, and whether a request of it has
    // carried an accepted key (until then it is closed at key_deadline_).
    absl::Time connected;
    bool keyed = false;
    std::set<uint64_t> calls;  // this side's calls under way to it
  };
  // Closes the accepted peers that presented no key by their deadline.
  void CloseUnkeyed();
  int unkeyed_ = 0;  // accepted peers not keyed yet
  struct Call {
    uint64_t peer = 0;
    absl::Time deadline;
    CallDone done;
  };
  // A message whose data UCX is still receiving.
  struct Receiving {
    Impl* impl;
    bool request;
    uint64_t peer;
    RequestHead request_head;
    ReplyHead reply_head;
    Bytes bytes;
  };

  void Loop();
  void RunPosted();
  void ExpireCalls();
  absl::Time NextDeadline() const;
  uint64_t AddPeer(ucp_ep_h ep, bool accepted);
  void Send(ucp_ep_h ep, unsigned am, SendState* state, bool reply_flag);
  void Deliver(Receiving* message);

  static void OnConnection(ucp_conn_request_h request, void* arg);
  static void OnPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t OnRequest(void* arg, const void* header,
                                size_t header_length, void* data, size_t length,
                                const ucp_am_recv_param_t* param);
  static ucs_status_t OnReply(void* arg, const void* header,
                              size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param);
  ucs_status_t Receive(Receiving* message, void* data, size_t length,
                       const ucp_am_recv_param_t* param);
  static void OnSent(void* request, ucs_status_t status, void* user_data);
  static void OnReceived(void* request, ucs_status_t status, size_t length,
                         void* user_data);
  static void OnClosed(void* request, ucs_status_t status, void* user_data);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int ucx_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<uint64_t> next_id_{0};

  Mutex mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // The messenger's thread's own.
  std::map<uint64_t, Peer> peers_;
  std::unordered_map<ucp_ep_h, uint64_t> peer_of_ep_;
  std::map<uint64_t, Call> calls_;
  int64_t sends_ = 0;     // sends UCX still holds
  int64_t closing_ = 0;   // endpoints still closing
  int64_t receives_ = 0;  // rendezvous receives under way
};

absl::Status Messenger::Impl::Start(const MessengerOptions& options) {
  InstallUcxLogLimit();
  key_deadline_ = options.key_deadline;
  max_unkeyed_ = options.max_unkeyed;
  max_message_bytes_ = options.max_message_bytes;
  SetTcpDefaultsUnlessUserSet();
  absl::StatusOr<ucp_config_t*> config = ReadUcxConfig(options);
  if (!config.ok()) return config.status();
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucs_status_t status = ucp_init(&params, *config, &context_);
  ucp_config_release(*config);
  if (status != UCS_OK) {
    context_ = nullptr;
    return FromUcs(status, absl::StrCat("UCX cannot start on transports '",
                                        options.transports, "'"));
  }
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) {
    worker_ = nullptr;
    return FromUcs(status, "UCX: creating a worker");
  }
  status = ucp_worker_get_efd(worker_, &ucx_fd_);
  if (status != UCS_OK) return FromUcs(status, "UCX: the worker's event fd");
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  if (absl::Status s = SetAmHandlers(); !s.ok()) return s;
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

absl::Status Messenger::Impl::SetAmHandlers() {
  for (unsigned id : {kRequestAm, kReplyAm}) {
    ucp_am_handler_param_t handler{};
    handler.field_mask =
        UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
        UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = id;
    handler.flags = UCP_AM_FLAG_WHOLE_MSG;
    handler.cb = id == kRequestAm ? &Impl::OnRequest : &Impl::OnReply;
    handler.arg = this;
    const ucs_status_t status =
        ucp_worker_set_am_recv_handler(worker_, &handler);
    if (status != UCS_OK) return FromUcs(status, "UCX: an AM handler");
  }
  return absl::OkStatus();
}

void Messenger::Impl::Stop() {
  if (thread_.joinable()) {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof one);
    (void)ignored;
    thread_.join();
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (context_ != nullptr) ucp_cleanup(context_);
  context_ = nullptr;
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

void Messenger::Impl::RunPosted() {
  std::vector<std::function<void()>> posted;
  {
    MutexLock lock(&mu_);
    posted.swap(posted_);
  }
  for (auto& fn : posted) fn();
}

absl::Time Messenger::Impl::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, call] : calls_) next = std::min(next, call.deadline);
  return next;
}

void Messenger::Impl::ExpireCalls() {
  const absl::Time now = absl::Now();
  std::vector<uint64_t> expired;
  for (const auto& [id, call] : calls_) {
    if (call.deadline <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    Reply reply;
    reply.status =
        absl::DeadlineExceededError("UCX call: no reply by its deadline");
    EndCall(id, std::move(reply));
  }
}

void Messenger::Impl::Loop() {
  for (;;) {
    RunPosted();
    bool stop;
    {
      MutexLock lock(&mu_);
      stop = stop_;
    }
    if (stop) break;
    while (ucp_worker_progress(worker_) != 0) {
    }
    ExpireCalls();
    CloseUnkeyed();
    // Sleep until UCX or a poster has something, or the next deadline.
    const ucs_status_t armed = ucp_worker_arm(worker_);
    if (armed == UCS_ERR_BUSY) continue;
    pollfd fds[2] = {{ucx_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    // At most 100 ms (and no overflow for a call-less InfiniteFuture).
    const absl::Duration until =
        std::min(NextDeadline() - absl::Now(), absl::Milliseconds(100));
    const int timeout_ms = static_cast<int>(
        std::max<int64_t>(absl::ToInt64Milliseconds(until) + 1, 0));
    if (poll(fds, 2, timeout_ms) > 0 && (fds[1].revents & POLLIN)) {
      uint64_t count;
      ssize_t ignored = read(wake_fd_, &count, sizeof count);
      (void)ignored;
    }
  }
  // Stopping: end every call, close every endpoint, and let UCX finish
  // what it holds (bounded: a peer that does not answer is not waited for).
  std::vector<uint64_t> calls;
  for (const auto& [id, call] : calls_) calls.push_back(id);
  for (uint64_t id : calls) {
    Reply reply;
    reply.status = absl::CancelledError("UCX messenger stopped");
    EndCall(id, std::move(reply));
  }
  std::vector<uint64_t> peers;
  for (const auto& [id, peer] : peers_) peers.push_back(id);
  for (uint64_t id : peers) {
    ClosePeer(id, absl::CancelledError("UCX messenger stopped"));
  }
  if (listener_ != nullptr) ucp_listener_destroy(listener_);
  listener_ = nullptr;
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while ((sends_ > 0 || closing_ > 0 || receives_ > 0) &&
         absl::Now() < give_up) {
    ucp_worker_progress(worker_);
  }
  if (sends_ > 0 || closing_ > 0 || receives_ > 0) {
    spdlog::warn(
        "UCX messenger stopped with {} sends, {} receives and {} "
        "endpoint closes unfinished",
        sends_, receives_, closing_);
  }
  RunPosted();  // what was posted meanwhile is dropped with the calls
}

uint64_t Messenger::Impl::AddPeer(ucp_ep_h ep, bool accepted) {
  const uint64_t id = NextId();
  Peer& peer = peers_[id];
  peer.ep = ep;
  peer.accepted = accepted;
  if (accepted) {
    peer.connected = absl::Now();
    unkeyed_++;
  }
  peer_of_ep_[ep] = id;
  return id;
}

void Messenger::Impl::CloseUnkeyed() {
  if (unkeyed_ == 0) return;
  const absl::Time too_old = absl::Now() - key_deadline_;
  std::vector<uint64_t> expired;
  for (const auto& [id, peer] : peers_) {
    if (peer.accepted && !peer.keyed && peer.connected <= too_old) {
      expired.push_back(id);
    }
  }
  for (uint64_t id : expired) {
    unkeyed_closed_++;
    ClosePeer(id, absl::UnauthenticatedError(
                      "UCX: the peer presented no accepted key in time"));
  }
  // More waiting than the cap: the oldest go first. A worker presents its
  // key as soon as it connects, so what waits longest is least likely one.
  while (unkeyed_ > max_unkeyed_) {
    uint64_t oldest = 0;
    absl::Time when = absl::InfiniteFuture();
    for (const auto& [id, peer] : peers_) {
      if (peer.accepted && !peer.keyed && peer.connected < when) {
        oldest = id;
        when = peer.connected;
      }
    }
    if (oldest == 0) break;
    unkeyed_evicted_++;
    ClosePeer(oldest, absl::UnauthenticatedError(
                          "UCX: too many connections without a key"));
  }
}

void Messenger::Impl::OnConnection(ucp_conn_request_h request, void* arg) {
  Impl* impl = static_cast<Impl*>(arg);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Impl::OnPeerError;
  params.err_handler.arg = impl;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(impl->worker_, &params, &ep);
  if (status != UCS_OK) {
    spdlog::warn("UCX: refusing a connection: {}", ucs_status_string(status));
    return;
  }
  impl->AddPeer(ep, /*accepted=*/true);
}

void Messenger::Impl::OnPeerError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  // Closed from the loop, not inside UCX's callback.
  Impl* impl = static_cast<Impl*>(arg);
  auto it = impl->peer_of_ep_.find(ep);
  if (it == impl->peer_of_ep_.end()) return;
  const uint64_t peer = it->second;
  // Whatever UCX calls it (often "Endpoint timeout" for a peer killed), the
  // peer is not there: UNAVAILABLE, as a gRPC channel says.
  const absl::Status why = absl::UnavailableError(absl::StrCat(
      "UCX: the peer's endpoint failed: ", ucs_status_string(status)));
  impl->Post([impl, peer, why] { impl->ClosePeer(peer, why); });
}

void Messenger::Impl::OnClosed(void* request, ucs_status_t, void* user_data) {
  static_cast<Impl*>(user_data)->closing_--;
  ucp_request_free(request);
}

void Messenger::Impl::ClosePeer(uint64_t id, const absl::Status& why) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  Peer peer = std::move(it->second);
  peers_.erase(it);
  if (peer.accepted && !peer.keyed) unkeyed_--;
  peer_of_ep_.erase(peer.ep);
  for (uint64_t call : peer.calls) {
    Reply reply;
    reply.status = absl::Status(why.code(), why.message());
    EndCall(call, std::move(reply));
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                       UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  param.cb.send = &Impl::OnClosed;
  param.user_data = this;
  ucs_status_ptr_t closing = ucp_ep_close_nbx(peer.ep, &param);
  if (UCS_PTR_IS_PTR(closing)) closing_++;
  if (peer.accepted && peer_gone_ != nullptr) peer_gone_(id);
}

namespace {

// `host` (an IPv4 address or a name) and `port` as a socket address;
// INVALID_ARGUMENT naming `what` when the name does not resolve.
absl::StatusOr<sockaddr_in> Resolve(const std::string& host, int port,
                                    absl::string_view what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  sockaddr_in addr = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

}  // namespace

absl::StatusOr<int> Messenger::Impl::ListenHere(const std::string& address,
                                                int port) {
  if (listener_ != nullptr) {
    return absl::FailedPreconditionError("UCX messenger: already listening");
  }
  absl::StatusOr<sockaddr_in> resolved = Resolve(address, port, "UCX listener");
  if (!resolved.ok()) return resolved.status();
  sockaddr_in addr = *resolved;
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                      UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = sizeof addr;
  params.conn_handler.cb = &Impl::OnConnection;
  params.conn_handler.arg = this;
  ucs_status_t status = ucp_listener_create(worker_, &params, &listener_);
  if (status != UCS_OK) {
    listener_ = nullptr;
    return FromUcs(status,
                   absl::StrCat("UCX listener on ", address, ":", port));
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  status = ucp_listener_query(listener_, &attr);
  if (status != UCS_OK) return FromUcs(status, "UCX: the listener's port");
  return ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
}

absl::StatusOr<uint64_t> Messenger::Impl::ConnectHere(const std::string& host,
                                                      int port) {
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("UCX connect: port ", port, " is not in 1..65535"));
  }
  absl::StatusOr<sockaddr_in> resolved = Resolve(host, port, "UCX connect");
  if (!resolved.ok()) return resolved.status();
  sockaddr_in addr = *resolved;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = sizeof addr;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Impl::OnPeerError;
  params.err_handler.arg = this;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(worker_, &params, &ep);
  if (status != UCS_OK) {
    return FromUcs(status, absl::StrCat("UCX connect to ", host, ":", port));
  }
  return AddPeer(ep, /*accepted=*/false);
}

void Messenger::Impl::OnSent(void* request, ucs_status_t status,
                             void* user_data) {
  SendState* state = static_cast<SendState*>(user_data);
  Impl* impl = static_cast<Impl*>(state->owner);
  impl->sends_--;
  if (status != UCS_OK && state->call != 0) {
    Reply reply;
    reply.status = absl::UnavailableError(absl::StrCat(
        "UCX: sending the request failed: ", ucs_status_string(status)));
    impl->EndCall(state->call, std::move(reply));
  }
  delete state;
  ucp_request_free(request);
}

void Messenger::Impl::Send(ucp_ep_h ep, unsigned am, SendState* state,
                           bool reply_flag) {
  state->owner = this;
  if (!state->prefix.empty()) {
    state->iov.push_back({state->prefix.data(), state->prefix.size()});
  }
  for (const Segment& segment : state->payload) {
    if (segment.size > 0) {
      state->iov.push_back({const_cast<void*>(segment.data), segment.size});
    }
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                       UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &Impl::OnSent;
  param.user_data = state;
  param.flags = reply_flag ? UCP_AM_SEND_FLAG_REPLY : 0;
  const void* buffer = nullptr;
  size_t count = 0;
  if (!state->iov.empty()) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype = ucp_dt_make_iov();
    buffer = state->iov.data();
    count = state->iov.size();
  }
  ucs_status_ptr_t sent = ucp_am_send_nbx(
      ep, am, state->head.data(), state->head.size(), buffer, count, &param);
  if (UCS_PTR_IS_PTR(sent)) {
    sends_++;
    return;
  }
  const ucs_status_t status = UCS_PTR_STATUS(sent);
  if (status != UCS_OK && state->call != 0) {
    Reply reply;
    reply.status = absl::UnavailableError(absl::StrCat(
        "UCX: sending the request failed: ", ucs_status_string(status)));
    EndCall(state->call, std::move(reply));
  }
  delete state;
}

void Messenger::Impl::StartCall(uint64_t call, uint64_t peer, uint32_t method,
                                const Key& key, std::string header,
                                std::vector<Segment> payload,
                                std::shared_ptr<const void> keep_alive,
                                absl::Time deadline, CallDone done) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) {
    Reply reply;
    reply.status = absl::UnavailableError(absl::StrCat(
        "UCX call: no connection ", peer, " (closed, or its peer went away)"));
    done(std::move(reply));
    return;
  }
  calls_[call] = Call{peer, deadline, std::move(done)};
  it->second.calls.insert(call);
  RequestHead head{};
  head.magic = kRequestMagic;
  head.method = method;
  head.call = call;
  std::memcpy(head.key, key.data(), key.size());
  head.header_size = header.size();
  auto* state = new SendState;
  state->head.assign(reinterpret_cast<const char*>(&head), sizeof head);
  state->prefix = std::move(header);
  state->payload = std::move(payload);
  state->keep_alive = std::move(keep_alive);
  state->call = call;
  Send(it->second.ep, kRequestAm, state, /*reply_flag=*/true);
}

void Messenger::Impl::SendReply(uint64_t peer, uint64_t call,
                                const absl::Status& status, std::string header,
                                std::vector<Segment> payload,
                                std::shared_ptr<const void> keep_alive) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;  // the peer has gone
  ReplyHead head{};
  head.magic = kReplyMagic;
  head.code = static_cast<int32_t>(status.code());
  head.call = call;
  const std::string message(status.message());
  head.message_size = message.size();
  head.header_size = header.size();
  auto* state = new SendState;
  state->head.assign(reinterpret_cast<const char*>(&head), sizeof head);
  state->prefix = message + header;
  state->payload = std::move(payload);
  state->keep_alive = std::move(keep_alive);
  Send(it->second.ep, kReplyAm, state, /*reply_flag=*/false);
}

void Messenger::Impl::EndCall(uint64_t id, Reply reply) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call call = std::move(it->second);
  calls_.erase(it);
  auto peer = peers_.find(call.peer);
  if (peer != peers_.end()) peer->second.calls.erase(id);
  call.done(std::move(reply));
}

ucs_status_t Messenger::Impl::OnRequest(void* arg, const void* header,
                                        size_t header_length, void* data,
                                        size_t length,
                                        const ucp_am_recv_param_t* param) {
  Impl* impl = static_cast<Impl*>(arg);
  RequestHead head;
  if (header_length != sizeof head) {
    impl->malformed_++;
    return UCS_OK;
  }
  std::memcpy(&head, header, sizeof head);
  if (head.magic != kRequestMagic || head.header_size > length) {
    impl->malformed_++;
    return UCS_OK;
  }
  AcceptedKey* key = nullptr;
  if (impl->require_key_) {
    Key carried;
    std::memcpy(carried.data(), head.key, carried.size());
    key = impl->FindKey(carried);
    if (key == nullptr) {
      impl->bad_key_++;
      return UCS_OK;
    }
  }
  if (impl->handler_ == nullptr ||
      !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
    impl->malformed_++;
    return UCS_OK;
  }
  auto peer = impl->peer_of_ep_.find(param->reply_ep);
  if (peer == impl->peer_of_ep_.end()) {
    impl->malformed_++;
    return UCS_OK;
  }
  if (key != nullptr) {
    if (key->peer == 0) key->peer = peer->second;  // its connection
    if (key->peer != peer->second) {
      impl->other_connection_++;
      return UCS_OK;
    }
  }
  // An accepted key (or none required): the peer may stay.
  if (auto known = impl->peers_.find(peer->second);
      known != impl->peers_.end() && known->second.accepted &&
      !known->second.keyed) {
    known->second.keyed = true;
    impl->unkeyed_--;
  }
  if (length > static_cast<uint64_t>(impl->max_message_bytes_)) {
    // No buffer for it, and a rendezvous' data is never pulled: returning
    // without a receive releases it.
    impl->too_large_++;
    const uint64_t from = peer->second;
    const uint64_t call = head.call;
    const absl::Status refused = absl::ResourceExhaustedError(
        absl::StrCat("UCX: a request of ", length, " bytes, more than the ",
                     impl->max_message_bytes_, " the listener takes"));
    impl->Post([impl, from, call, refused] {
      impl->SendReply(from, call, refused, "", {}, nullptr);
    });
    return UCS_OK;
  }
  auto* message = new Receiving{impl, true, peer->second, head, {}, {}};
  return impl->Receive(message, data, length, param);
}

ucs_status_t Messenger::Impl::OnReply(void* arg, const void* header,
                                      size_t header_length, void* data,
                                      size_t length,
                                      const ucp_am_recv_param_t* param) {
  Impl* impl = static_cast<Impl*>(arg);
  ReplyHead head;
  if (header_length != sizeof head) {
    impl->malformed_++;
    return UCS_OK;
  }
  std::memcpy(&head, header, sizeof head);
  if (head.magic != kReplyMagic || head.message_size > length ||
      head.header_size > length - head.message_size) {
    impl->malformed_++;
    return UCS_OK;
  }
  if (impl->calls_.count(head.call) == 0) {
    impl->unknown_call_++;
    return UCS_OK;
  }
  auto* message = new Receiving{impl, false, 0, {}, head, {}};
  return impl->Receive(message, data, length, param);
}

ucs_status_t Messenger::Impl::Receive(Receiving* message, void* data,
                                      size_t length,
                                      const ucp_am_recv_param_t* param) {
  const size_t before = message->request
                            ? message->request_head.header_size
                            : size_t{message->reply_head.message_size} +
                                  message->reply_head.header_size;
  message->bytes = NewBytes(length, before);
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    if (length > 0) std::memcpy(message->bytes.begin(), data, length);
    Deliver(message);
    return UCS_OK;
  }
  ucp_request_param_t recv{};
  recv.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  recv.cb.recv_am = &Impl::OnReceived;
  recv.user_data = message;
  ucs_status_ptr_t started = ucp_am_recv_data_nbx(
      worker_, data, message->bytes.begin(), length, &recv);
  if (UCS_PTR_IS_PTR(started)) {
    receives_++;
    return UCS_INPROGRESS;
  }
  if (UCS_PTR_STATUS(started) == UCS_OK) {
    Deliver(message);
  } else {
    receive_failed_++;
    delete message;
  }
  return UCS_INPROGRESS;
}

void Messenger::Impl::OnReceived(void* request, ucs_status_t status, size_t,
                                 void* user_data) {
  auto* message = static_cast<Receiving*>(user_data);
  Impl* impl = message->impl;
  impl->receives_--;
  ucp_request_free(request);
  if (status != UCS_OK) {
    impl->receive_failed_++;
    delete message;
    return;
  }
  impl->Deliver(message);
}

void Messenger::Impl::Deliver(Receiving* message) {
  std::unique_ptr<Receiving> owned(message);
  const char* base = message->bytes.begin();
  if (message->request) {
    if (peers_.count(message->peer) == 0) return;  // gone meanwhile
    Request request;
    request.method = message->request_head.method;
    const size_t header_size = message->request_head.header_size;
    request.header = absl::string_view(base, header_size);
    request.payload = absl::string_view(base + header_size,
                                        message->bytes.size - header_size);
    request.bytes = std::move(message->bytes);
    request.peer = message->peer;
    request.call = message->request_head.call;
    std::memcpy(request.key.data(), message->request_head.key,
                request.key.size());
    handler_(std::move(request));
    return;
  }
  const ReplyHead& head = message->reply_head;
  if (calls_.count(head.call) == 0) {
    unknown_call_++;  // ended (deadline, cancel) while its data came
    return;
  }
  Reply reply;
  const absl::string_view text(base, head.message_size);
  const auto code = static_cast<absl::StatusCode>(head.code);
  reply.status = code == absl::StatusCode::kOk ? absl::OkStatus()
                                               : absl::Status(code, text);
  reply.header = absl::string_view(base + head.message_size, head.header_size);
  const size_t before = head.message_size + head.header_size;
  reply.payload =
      absl::string_view(base + before, message->bytes.size - before);
  reply.bytes = std::move(message->bytes);
  EndCall(head.call, std::move(reply));
}

Messenger::Messenger(std::unique_ptr<Impl> impl, std::string transports)
    : impl_(std::move(impl)), transports_(std::move(transports)) {}

Messenger::~Messenger() { impl_->Stop(); }

absl::StatusOr<std::unique_ptr<Messenger>> Messenger::Create(
    const MessengerOptions& options) {
  auto impl = std::make_unique<Impl>();
  absl::Status started = impl->Start(options);
  if (!started.ok()) return started;
  return std::unique_ptr<Messenger>(new Messenger(
      std::move(impl),
      options.transports.empty() ? "(UCX's choice)" : options.transports));
}

absl::StatusOr<int> Messenger::Listen(const std::string& address, int port,
                                      Handler handler, bool require_key,
                                      PeerGone peer_gone) {
  if (handler == nullptr) {
    return absl::InvalidArgumentError("UCX listener: no handler");
  }
  Impl* impl = impl_.get();
  return impl->RunAndWait<absl::StatusOr<int>>(
      [impl, address, port, handler = std::move(handler), require_key,
       peer_gone = std::move(peer_gone)]() -> absl::StatusOr<int> {
        absl::StatusOr<int> bound = impl->ListenHere(address, port);
        if (bound.ok()) {
          impl->handler_ = handler;
          impl->peer_gone_ = peer_gone;
          impl->require_key_ = require_key;
        }
        return bound;
      });
}

void Messenger::AcceptKey(const Key& key) {
  Impl* impl = impl_.get();
  impl->RunAndWait<bool>([impl, key] {
    if (impl->FindKey(key) == nullptr) impl->keys_.push_back({key, 0});
    return true;
  });
}

void Messenger::ReleaseKey(const Key& key) {
  Impl* impl = impl_.get();
  impl->RunAndWait<bool>([impl, key] {
    if (auto* entry = impl->FindKey(key)) entry->peer = 0;
    return true;
  });
}

void Messenger::RevokeKey(const Key& key) {
  Impl* impl = impl_.get();
  impl->RunAndWait<bool>([impl, key] {
    auto& keys = impl->keys_;
    keys.erase(std::remove_if(keys.begin(), keys.end(),
                              [&](const auto& entry) {
                                return KeysEqual(entry.key, key);
                              }),
               keys.end());
    return true;
  });
}

void Messenger::Respond(uint64_t peer, uint64_t call,
                        const absl::Status& status, std::string header,
                        std::vector<Segment> payload,
                        std::shared_ptr<const void> keep_alive) {
  Impl* impl = impl_.get();
  impl->Post([impl, peer, call, status, header = std::move(header),
              payload = std::move(payload),
              keep_alive = std::move(keep_alive)]() mutable {
    impl->SendReply(peer, call, status, std::move(header), std::move(payload),
                    std::move(keep_alive));
  });
}

absl::StatusOr<uint64_t> Messenger::Connect(const std::string& host, int port) {
  Impl* impl = impl_.get();
  return impl->RunAndWait<absl::StatusOr<uint64_t>>(
      [impl, host, port] { return impl->ConnectHere(host, port); });
}

void Messenger::Disconnect(uint64_t peer) {
  Impl* impl = impl_.get();
  impl->RunAndWait<bool>([impl, peer] {
    impl->ClosePeer(peer, absl::CancelledError("UCX: disconnected"));
    return true;
  });
}

uint64_t Messenger::Call(uint64_t peer, uint32_t method, const Key& key,
                         std::string header, std::vector<Segment> payload,
                         std::shared_ptr<const void> keep_alive,
                         absl::Time deadline, CallDone done) {
  Impl* impl = impl_.get();
  const uint64_t call = impl->NextId();
  impl->Post([impl, call, peer, method, key, header = std::move(header),
              payload = std::move(payload), keep_alive = std::move(keep_alive),
              deadline, done = std::move(done)]() mutable {
    impl->StartCall(call, peer, method, key, std::move(header),
                    std::move(payload), std::move(keep_alive), deadline,
                    std::move(done));
  });
  return call;
}

void Messenger::Cancel(uint64_t call) {
  Impl* impl = impl_.get();
  impl->Post([impl, call] {
    Reply reply;
    reply.status = absl::CancelledError("UCX call cancelled");
    impl->EndCall(call, std::move(reply));
  });
}

Reply Messenger::CallAndWait(uint64_t peer, uint32_t method, const Key& key,
                             std::string header, std::vector<Segment> payload,
                             absl::Time deadline) {
  // Waits for the reply and for UCX to let go of the payload, which is the
  // caller's memory.
  Mutex mu;
  CondVar cv;
  bool done = false;
  bool released = false;
  ucx::Reply result;
  std::shared_ptr<const void> in_use(nullptr, [&](const void*) {
    MutexLock lock(&mu);
    released = true;
    cv.SignalAll();
  });
  Call(peer, method, key, std::move(header), std::move(payload),
       std::move(in_use), deadline, [&](ucx::Reply reply) {
         MutexLock lock(&mu);
         result = std::move(reply);
         done = true;
         cv.SignalAll();
       });
  MutexLock lock(&mu);
  cv.WaitUntil(
      &mu, absl::InfiniteFuture(),
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done && released; });
  return result;
}

DropCounts Messenger::drops() const {
  DropCounts counts;
  counts.bad_key = impl_->bad_key_.load();
  counts.other_connection = impl_->other_connection_.load();
  counts.malformed = impl_->malformed_.load();
  counts.unknown_call = impl_->unknown_call_.load();
  counts.receive_failed = impl_->receive_failed_.load();
  counts.unkeyed_closed = impl_->unkeyed_closed_.load();
  counts.unkeyed_evicted = impl_->unkeyed_evicted_.load();
  counts.too_large = impl_->too_large_.load();
  return counts;
}

}  // namespace ucx
}  // namespace ps
}  // namespace psgd
