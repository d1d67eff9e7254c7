// Requests and replies over UCX (UCP active messages): the data plane's
// transport between hosts (docs/MULTIHOST.md). One Messenger is one UCP
// context and worker, driven by a thread of its own; it listens for peers,
// connects to them, and carries calls: a request (a method number, a key, a
// header and a payload of byte ranges) and its reply (a status, a header and
// a payload). What the bytes mean is the caller's; the messenger knows
// nothing of shards or tensors.
//
// On the wire a message is one active message: a fixed head (a magic number,
// the call's id, the method and the key, or the reply's status) as UCP's AM
// header, and the caller's header followed by the payload as its data. UCX
// sends small data eagerly and large data by rendezvous: the receiver pulls
// it (RDMA where the transport has it, a zero-copy socket send otherwise)
// once it has checked the head. A request whose key the listener does not
// accept is dropped before any of its data is read, counted, and never
// reaches the handler; so is a message too short to hold its own header, a
// reply to no call under way, and a message with another magic number.
//
// The accepted keys are searched with KeysEqual, every one of them for
// every request (a handful: one a worker), so that how long the search
// takes tells nothing of how much of a key was right.
//
// A key belongs to one connection: the first peer whose request carries an
// accepted key binds it, and the key's requests from any other peer are
// dropped the same way (counted apart), so that a key read off the wire
// (UCX's tcp transport does not encrypt) cannot be used from another
// connection. ReleaseKey lets the next peer bind it again: for a holder
// that has connected anew and said so over its authenticated channel.
//
// Faults: a peer that goes away (its process killed, its endpoint in error)
// ends every call under way to it with UNAVAILABLE; a call not answered by
// its deadline ends with DEADLINE_EXCEEDED (a later reply is dropped and
// counted); Cancel ends one with CANCELLED. A call's payload memory is held
// (through `keep_alive`) until UCX has let go of it, which may be after the
// call has ended.
//
// Thread-safety: every public method may be called from any thread. The
// handler and each call's `done` run on the messenger's thread and must not
// block; they may call the messenger (Respond, Call, and the methods that
// wait for the messenger's thread, which then run at once).
#ifndef PSGD_PS_UCX_MESSENGER_H_
#define PSGD_PS_UCX_MESSENGER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psgd {
namespace ps {
namespace ucx {

// A data message's credential: 16 random bytes handed to a peer over an
// authenticated control channel (RandomKey makes one).
using Key = std::array<uint8_t, 16>;
absl::StatusOr<Key> RandomKey();
// Whether `a` and `b` are the same key, in a time that does not depend on
// where they differ (every byte is read; no early exit). The messenger
// finds a request's key among the accepted ones with it, never by a lookup
// keyed by the secret.
bool KeysEqual(const Key& a, const Key& b);

struct MessengerOptions {
  // The UCX transports, as UCX_TLS names them: "tcp", "posix,cma,tcp",
  // "rc,ud,sm" on an InfiniBand cluster; "" leaves the choice to UCX (and
  // to UCX_TLS in the environment).
  std::string transports = "tcp";
  // Other UCP settings by their names without the UCX_ prefix
  // ("RNDV_THRESH", "NET_DEVICES"), each checked by UCX. A transport's own
  // settings (UCX_TCP_*, UCX_IB_*) are read from the environment: Create
  // puts the messenger's defaults there (UCX_TCP_TX_SEG_SIZE and
  // UCX_TCP_RX_SEG_SIZE of 1M) unless either is set already.
  std::vector<std::pair<std::string, std::string>> settings;
  // A peer that connects to the listener must present an accepted key (its
  // first request) within `key_deadline`, or its endpoint is closed; no
  // more than `max_unkeyed` such peers wait at once: beyond them, the one
  // that has waited longest is closed. (Raw TCP connections that never speak
  // UCP stay inside UCX, below the messenger: the process's descriptor limit
  // bounds them, ps_server raises it to its hard limit.)
  absl::Duration key_deadline = absl::Seconds(5);
  int max_unkeyed = 64;
  // The longest request (its header and payload) the listener takes: one
  // whose key is accepted but that claims more is answered
  // RESOURCE_EXHAUSTED naming the limit, before any buffer of the messenger's
  // is made for it (a rendezvous' data is never pulled). UCX itself
  // assembles a message sent eagerly in fragments before the messenger sees
  // its key (UCP allocates what the first fragment claims): the key deadline
  // above bounds how long a connection without a key can do that.
  int64_t max_message_bytes = int64_t{256} << 20;
};

// A byte range of a payload; the payload is the ranges in order.
struct Segment {
  const void* data = nullptr;
  size_t size = 0;
};

// Gives a received message's buffer of `capacity` bytes back: one of at
// least kMinPooledBuffer bytes is kept (up to kMaxPooledBytes in all, in
// the process) for the next message of about its size, so that messages of
// several MiB do not map and fault in fresh pages each time (glibc maps
// blocks above its mmap threshold on their own: 4 MiB in psgd's programs,
// common/malloc_tuning.h).
inline constexpr size_t kMinPooledBuffer = size_t{1} << 20;
inline constexpr size_t kMaxPooledBytes = size_t{256} << 20;
struct ReturnBuffer {
  size_t capacity = 0;
  void operator()(char* p) const;
};
// Buffers of at least kMinPooledBuffer bytes allocated afresh so far (in
// this process), for tests and reports.
int64_t PooledBuffersAllocated();

// An owned, uninitialised byte buffer (a received message): `size` bytes
// from begin(), placed so that the payload after the headers starts at a
// multiple of kPayloadAlign.
inline constexpr size_t kPayloadAlign = 64;
struct Bytes {
  std::unique_ptr<char[], ReturnBuffer> data;
  size_t skip = 0;  // begin() is data.get() + skip
  size_t size = 0;
  char* begin() const { return data.get() + skip; }
  absl::string_view view() const { return {begin(), size}; }
};

// A request as the listener's handler sees it. Its payload starts at a
// multiple of kPayloadAlign.
struct Request {
  uint32_t method = 0;
  absl::string_view header;   // within `bytes`
  absl::string_view payload;  // within `bytes`, after the header
  Bytes bytes;
  // Where the reply goes (Messenger::Respond).
  uint64_t peer = 0;
  uint64_t call = 0;
  // The key it carried (one the listener accepted when it came).
  Key key{};
};

// A call's reply: its status (the handler's, or the messenger's), header
// and payload (as Request's).
struct Reply {
  absl::Status status;
  absl::string_view header;
  absl::string_view payload;
  Bytes bytes;
};

// Why messages were dropped, counted since the messenger started.
struct DropCounts {
  int64_t bad_key = 0;  // a request whose key is not accepted
  // A request whose key is accepted but bound to another connection.
  int64_t other_connection = 0;
  int64_t malformed = 0;       // wrong magic, too short, header past the end
  int64_t unknown_call = 0;    // a reply to no call under way (late, or forged)
  int64_t receive_failed = 0;  // the data of a message could not be read
  // Connections to the listener closed for presenting no accepted key
  // within MessengerOptions::key_deadline, and those closed (the longest
  // waiting) because more than max_unkeyed were waiting.
  int64_t unkeyed_closed = 0;
  int64_t unkeyed_evicted = 0;
  // A request with an accepted key longer than max_message_bytes.
  int64_t too_large = 0;
};

// UCX's own log lines (its warnings and errors: "accept() failed" for each
// connection a full descriptor table refuses, which it retries at once)
// pass through a filter the first Messenger::Create installs: at most
// kUcxLogLinesPerSecond a second reach stderr, and the number held back is
// logged once a second after. Returns the lines held back so far.
inline constexpr int kUcxLogLinesPerSecond = 20;
int64_t UcxLogLinesSuppressed();

class Messenger {
 public:
  using Handler = std::function<void(Request request)>;
  using CallDone = std::function<void(Reply reply)>;
  // A peer that connected to the listener has gone (its endpoint failed or
  // closed): what its requests still wait for will not be read.
  using PeerGone = std::function<void(uint64_t peer)>;

  // Starts UCX on `options.transports` and the messenger's thread.
  // INVALID_ARGUMENT naming the setting UCX refused; UNAVAILABLE when UCX
  // cannot start there.
  static absl::StatusOr<std::unique_ptr<Messenger>> Create(
      const MessengerOptions& options);
  // Ends every call under way with CANCELLED, closes every endpoint and
  // stops the thread.
  ~Messenger();
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  // Listens on `address` (an IPv4 address or a name, "0.0.0.0" for all) and
  // `port` (0: any) and returns the port. Requests go to `handler`, which must
  // answer each (Respond) once; only requests whose key AcceptKey has
  // accepted reach it (with `require_key` false, any key does). One
  // listener per messenger. `peer_gone` (may be null) runs on the
  // messenger's thread, once, when a peer that connected here goes.
  absl::StatusOr<int> Listen(const std::string& address, int port,
                             Handler handler, bool require_key = true,
                             PeerGone peer_gone = nullptr);
  // Keys the listener accepts (one accepted already keeps its connection),
  // and stops accepting.
  void AcceptKey(const Key& key);
  void RevokeKey(const Key& key);
  // An accepted key's next request binds it to its peer, whichever that is
  // (nothing for a key not accepted).
  void ReleaseKey(const Key& key);

  // Answers request (peer, call) with `status` (its message travels too),
  // `header` and `payload`; keep_alive holds the payload's memory until UCX
  // has sent it. Nothing when the peer has gone.
  void Respond(uint64_t peer, uint64_t call, const absl::Status& status,
               std::string header, std::vector<Segment> payload,
               std::shared_ptr<const void> keep_alive);

  // An endpoint to the listener at host:port (an IPv4 address or a name);
  // UCX connects in the background (a peer that is not there ends the
  // first calls with UNAVAILABLE). Returns the peer's number.
  absl::StatusOr<uint64_t> Connect(const std::string& host, int port);
  // Closes the endpoint; its calls under way end with CANCELLED.
  void Disconnect(uint64_t peer);

  // Sends a request to `peer`; `done` runs once, on the messenger's thread,
  // with the reply or the call's error. keep_alive holds the payload's
  // memory until UCX has let go of it. Returns the call's number (Cancel).
  uint64_t Call(uint64_t peer, uint32_t method, const Key& key,
                std::string header, std::vector<Segment> payload,
                std::shared_ptr<const void> keep_alive, absl::Time deadline,
                CallDone done);
  // Ends call `call` with CANCELLED, if it is still under way.
  void Cancel(uint64_t call);

  // Call, waiting for the reply.
  Reply CallAndWait(uint64_t peer, uint32_t method, const Key& key,
                    std::string header, std::vector<Segment> payload,
                    absl::Time deadline);

  DropCounts drops() const;
  // The transports UCX uses, as configured ("tcp", or "(UCX's choice)").
  const std::string& transports() const { return transports_; }

 private:
  class Impl;
  explicit Messenger(std::unique_ptr<Impl> impl, std::string transports);
  const std::unique_ptr<Impl> impl_;
  const std::string transports_;
};

}  // namespace ucx
}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_UCX_MESSENGER_H_
