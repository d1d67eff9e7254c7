// Tensors through shared memory between a worker and a server on one machine
// (cluster config `wire { shared_memory: true }`, docs/PS.md "Shared memory on
// one machine"): the socket's two kernel copies and gRPC's framing of tens of
// megabytes a step become one memcpy on each side.
//
// The worker makes a SharedRegion (an anonymous memfd named "psgd-shm",
// mapped, sealed against shrinking and growing) and names it in its push or
// pull (proto/ps.proto, SharedMemory: its pid, the descriptor's number, a
// random nonce, the size). The server takes that descriptor itself from the
// worker's process (pidfd_getfd: the kernel allows it to the worker's own
// user and to root; no path is opened) and maps it only when it carries the
// seals (which only a memfd can: no other file is ever mapped), holds the
// size named, which is at most what the shard's tensors can need, and starts
// with the magic and the nonce. A sealed region cannot shrink under the
// server's copy (no SIGBUS). A worker on another machine, or another user's
// (unless the server is root), or in another pid namespace, names a segment
// the server cannot take: the server says so, without naming any file, and
// the bytes go over gRPC as before.
//
// What the server reads from a region it reads once: a push's gradients are
// copied into the server's own memory before anything checks or decodes them
// (ShardRequestHandler::Push), so a worker changing them during the call
// changes nothing the server has checked.
//
// A region's first kHeaderBytes hold the magic and nonce; tensors follow at
// offsets aligned to kSharedAlign (SharedLayout). One call uses a region at a
// time: the worker writes a push's gradients before the call and reads a
// pull's weights after it; the server reads and writes only while it serves
// the call.
//
// Thread-safety: a SharedRegion is used by one thread at a time;
// SharedSegments is thread-safe, and a SharedSegment it returns stays mapped
// while any caller holds it.
#ifndef PSGD_PS_WIRE_SHARED_MEMORY_H_
#define PSGD_PS_WIRE_SHARED_MEMORY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "proto/ps.pb.h"

namespace psgd {
namespace ps {

// The magic at a region's start, then the 16-byte nonce.
inline constexpr char kSharedMagic[8] = {'p', 's', 'g', 'd',
                                         '-', 's', 'h', 'm'};
inline constexpr int64_t kSharedHeaderBytes = 64;
inline constexpr int64_t kSharedAlign = 64;
// The memfd's name (Linux shows it as "/memfd:psgd-shm (deleted)").
inline constexpr char kSharedMemfdName[] = "psgd-shm";

// Places tensors one after another after the header, each at an offset
// aligned to kSharedAlign.
class SharedLayout {
 public:
  // The offset of the next `bytes` bytes.
  int64_t Add(int64_t bytes) {
    const int64_t offset = end_;
    end_ += (bytes + kSharedAlign - 1) / kSharedAlign * kSharedAlign;
    return offset;
  }
  // The region size the tensors placed so far need.
  int64_t size() const { return end_; }

 private:
  int64_t end_ = kSharedHeaderBytes;
};

// `size` bytes at `offset` of a segment of `segment` bytes, or
// INVALID_ARGUMENT naming `what` when they are not within its tensor area.
absl::StatusOr<int64_t> CheckSharedBytes(const wire::SharedBytes& bytes,
                                         int64_t segment,
                                         absl::string_view what);

// The worker's side: a memfd of `size` bytes, mapped.
class SharedRegion {
 public:
  // INTERNAL with the system's error when the memfd cannot be made or
  // mapped; INVALID_ARGUMENT for a size below the header's.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(int64_t size);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  char* data() { return data_; }
  int64_t size() const { return size_; }
  // How a request names it.
  void Describe(wire::SharedMemory* out) const;

 private:
  SharedRegion(int fd, char* data, int64_t size, uint64_t nonce_high,
               uint64_t nonce_low);

  const int fd_;
  char* const data_;
  const int64_t size_;
  const uint64_t nonce_high_;
  const uint64_t nonce_low_;
};

// The server's view of a worker's region.
class SharedSegment {
 public:
  SharedSegment(char* data, int64_t size) : data_(data), size_(size) {}
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  char* data() const { return data_; }
  int64_t size() const { return size_; }
  absl::string_view bytes() const { return absl::string_view(data_, size_); }

 private:
  char* const data_;
  const int64_t size_;
};

// The server's segments, opened once and kept while they are used: a segment
// unused for kIdle is let go at the next Attach, and at most kMaxSegments are
// kept (the least recently used go first).
class SharedSegments {
 public:
  static constexpr absl::Duration kIdle = absl::Seconds(120);
  static constexpr size_t kMaxSegments = 256;

  // `reachable` false: no process can be reached (tests play a server on
  // another machine with it).
  explicit SharedSegments(bool reachable = true) : reachable_(reachable) {}

  // The segment `ref` names, mapped; FAILED_PRECONDITION starting "shared
  // memory segment" when it cannot be taken or is not the worker's region:
  // more than `max_bytes` (kTooLarge), a process it cannot reach
  // (kUnreachable), and one text (kNotRegion) for every descriptor it
  // cannot use (none there, not a sealed memfd, smaller than ref.size,
  // another nonce); INVALID_ARGUMENT for a size below the header's.
  absl::StatusOr<std::shared_ptr<const SharedSegment>> Attach(
      const wire::SharedMemory& ref, int64_t max_bytes);

  // Segments kept, and their bytes (mapped, not necessarily resident).
  size_t count() const;
  int64_t mapped_bytes() const;

 private:
  using Key = std::tuple<int32_t, int32_t, uint64_t, uint64_t>;
  struct Entry {
    std::shared_ptr<const SharedSegment> segment;
    absl::Time used;
  };
  absl::StatusOr<std::shared_ptr<const SharedSegment>> Open(
      const wire::SharedMemory& ref) const;
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool reachable_;
  mutable Mutex mu_;
  std::map<Key, Entry> segments_ ABSL_GUARDED_BY(mu_);
};

// Why a server could not use a worker's segment (SharedSegments::Attach):
// a FAILED_PRECONDITION whose reason is its payload, also across gRPC (as a
// PushRefusal's), so that the worker tells it apart without reading the
// message and sends bytes instead.
enum class SharedMemoryRefusal {
  kNone,         // not a refusal: OK, or any other error
  kTooLarge,     // larger than the shard's tensors can need
  kUnreachable,  // another machine's process (or pidfd_open failed)
  // Any descriptor the server cannot use: none by that number, one that
  // cannot be taken (another user's), no memfd sealed against resizing,
  // fewer bytes than the request names, unmappable, another header. One
  // reason and one text for all, so that naming another process's
  // descriptors (the server's own) tells nothing of which exist.
  kNotRegion,
};

// "none", "too_large", "unreachable", "not_region".
absl::string_view SharedMemoryRefusalName(SharedMemoryRefusal reason);
// The reason a refusal carries; kNone for any other status.
SharedMemoryRefusal SharedMemoryRefusalOf(const absl::Status& status);
// SharedMemoryRefusalOf(status) != kNone.
bool IsSharedMemoryRefusal(const absl::Status& status);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_SHARED_MEMORY_H_
