#include "ps/wire/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_reason.h"

namespace psgd {
namespace ps {
namespace {

constexpr char kRefusal[] = "shared memory segment";
constexpr absl::string_view kRefusalUrl =
    "type.psgd/psgd.ps.SharedMemoryRefusal";
// Every descriptor the server cannot use, whatever the reason.
constexpr char kNotRegionText[] =
    "not a shared memory region of the worker's that this server can take "
    "(a memfd sealed against resizing, of the size and with the header the "
    "request names)";

// FAILED_PRECONDITION naming the segment and `why`, with `reason` as its
// payload.
absl::Status Refused(SharedMemoryRefusal reason, const wire::SharedMemory& ref,
                     absl::string_view why) {
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          kRefusal, " of process ", ref.pid(), " (fd ", ref.fd(), "): ", why)),
      kRefusalUrl, SharedMemoryRefusalName(reason));
}

std::string Errno(absl::string_view what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

// The header: magic, then the nonce's two halves (little-endian, as this
// machine stores them: both sides are on it).
void WriteHeader(char* data, uint64_t high, uint64_t low) {
  std::memcpy(data, kSharedMagic, sizeof(kSharedMagic));
  std::memcpy(data + 8, &high, 8);
  std::memcpy(data + 16, &low, 8);
}

bool HeaderMatches(const char* data, uint64_t high, uint64_t low) {
  uint64_t h, l;
  std::memcpy(&h, data + 8, 8);
  std::memcpy(&l, data + 16, 8);
  return std::memcmp(data, kSharedMagic, sizeof(kSharedMagic)) == 0 &&
         h == high && l == low;
}

}  // namespace

absl::StatusOr<int64_t> CheckSharedBytes(const wire::SharedBytes& bytes,
                                         int64_t segment,
                                         absl::string_view what) {
  const int64_t offset = bytes.offset();
  const int64_t size = bytes.size();
  if (offset < kSharedHeaderBytes || size < 0 || offset > segment ||
      size > segment - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shared bytes [", offset, ", +", size,
                     ") are not within the segment's tensor area [",
                     kSharedHeaderBytes, ", ", segment, ")"));
  }
  return offset;
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(
    int64_t size) {
  if (size < kSharedHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared region of ", size, " bytes: below the ",
                     kSharedHeaderBytes, "-byte header"));
  }
  uint64_t nonce[2];
  if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce)) {
    return absl::InternalError(Errno("shared region: getrandom"));
  }
  const int fd =
      memfd_create(kSharedMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::InternalError(Errno("shared region: memfd_create"));
  if (ftruncate(fd, size) != 0) {
    const std::string error =
        Errno(absl::StrCat("shared region: ftruncate to ", size));
    close(fd);
    return absl::InternalError(error);
  }
  // Its size fixed for good: a server that maps it can never be made to
  // read past its end (SIGBUS) by a shrink.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const std::string error = Errno("shared region: sealing");
    close(fd);
    return absl::InternalError(error);
  }
  void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const std::string error = Errno("shared region: mmap");
    close(fd);
    return absl::InternalError(error);
  }
  WriteHeader(static_cast<char*>(data), nonce[0], nonce[1]);
  return std::unique_ptr<SharedRegion>(
      new SharedRegion(fd, static_cast<char*>(data), size, nonce[0], nonce[1]));
}

SharedRegion::SharedRegion(int fd, char* data, int64_t size,
                           uint64_t nonce_high, uint64_t nonce_low)
    : fd_(fd),
      data_(data),
      size_(size),
      nonce_high_(nonce_high),
      nonce_low_(nonce_low) {}

SharedRegion::~SharedRegion() {
  munmap(data_, static_cast<size_t>(size_));
  close(fd_);
}

void SharedRegion::Describe(wire::SharedMemory* out) const {
  out->set_pid(static_cast<int32_t>(getpid()));
  out->set_fd(fd_);
  out->set_nonce_high(nonce_high_);
  out->set_nonce_low(nonce_low_);
  out->set_size(size_);
}

SharedSegment::~SharedSegment() { munmap(data_, static_cast<size_t>(size_)); }

absl::StatusOr<std::shared_ptr<const SharedSegment>> SharedSegments::Attach(
    const wire::SharedMemory& ref, int64_t max_bytes) {
  if (ref.size() < kSharedHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory of process ", ref.pid(), " (fd ", ref.fd(), "): size ",
        ref.size(), " is below the ", kSharedHeaderBytes, "-byte header"));
  }
  if (ref.size() > max_bytes) {
    return Refused(SharedMemoryRefusal::kTooLarge, ref,
                   absl::StrCat(ref.size(), " bytes, more than the ", max_bytes,
                                " this shard's tensors can need"));
  }
  const Key key{ref.pid(), ref.fd(), ref.nonce_high(), ref.nonce_low()};
  const absl::Time now = absl::Now();
  {
    MutexLock lock(&mu_);
    auto it = segments_.find(key);
    if (it != segments_.end() && it->second.segment->size() >= ref.size()) {
      it->second.used = now;
      return it->second.segment;
    }
  }
  // Opened outside the lock (a system call or three); two calls may open
  // the same segment at once, and the second's mapping replaces the first's
  // in the map (both stay valid while held).
  absl::StatusOr<std::shared_ptr<const SharedSegment>> segment = Open(ref);
  if (!segment.ok()) return segment.status();
  MutexLock lock(&mu_);
  segments_[key] = Entry{*segment, now};
  EvictLocked(now);
  return *segment;
}

absl::StatusOr<std::shared_ptr<const SharedSegment>> SharedSegments::Open(
    const wire::SharedMemory& ref) const {
  auto refuse = [&](SharedMemoryRefusal reason, absl::string_view why) {
    return Refused(reason, ref, why);
  };
  if (!reachable_) {
    return refuse(SharedMemoryRefusal::kUnreachable,
                  "cannot reach the process (a worker on another machine)");
  }
  // The worker's descriptor itself (pidfd_getfd), never a path opened
  // again: what is checked below is what gets mapped. The kernel hands it
  // over only to a process allowed to trace the worker (the same user, or
  // root).
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, ref.pid(), 0));
  if (pidfd < 0) {
    return refuse(
        SharedMemoryRefusal::kUnreachable,
        absl::StrCat("cannot reach the process (", std::strerror(errno),
                     "): is the worker on another machine?"));
  }
  // From here on every failure is the one refusal, whatever failed: no
  // descriptor, one that cannot be taken, a socket, a file, a memfd without
  // the seals, too small, unmappable or with another header. A member
  // naming another process's descriptors (the server's own among them)
  // learns nothing of which exist or what they are.
  auto not_region = [&] {
    return refuse(SharedMemoryRefusal::kNotRegion, kNotRegionText);
  };
  const int fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, ref.fd(), 0));
  close(pidfd);
  if (fd < 0) return not_region();
  // Only a memfd has seals: F_GET_SEALS also proves what the file is.
  const int seals = fcntl(fd, F_GET_SEALS);
  const int sealed = F_SEAL_SHRINK | F_SEAL_GROW;
  if (seals < 0 || (seals & sealed) != sealed) {
    close(fd);
    return not_region();
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < ref.size()) {
    close(fd);
    return not_region();
  }
  void* data = mmap(nullptr, static_cast<size_t>(ref.size()),
                    PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the file
  if (data == MAP_FAILED) return not_region();
  auto segment = std::make_shared<const SharedSegment>(static_cast<char*>(data),
                                                       ref.size());
  if (!HeaderMatches(segment->data(), ref.nonce_high(), ref.nonce_low())) {
    return not_region();
  }
  return segment;
}

void SharedSegments::EvictLocked(absl::Time now) {
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (now - it->second.used > kIdle) {
      it = segments_.erase(it);
    } else {
      ++it;
    }
  }
  while (segments_.size() > kMaxSegments) {
    auto oldest = segments_.begin();
    for (auto it = segments_.begin(); it != segments_.end(); ++it) {
      if (it->second.used < oldest->second.used) oldest = it;
    }
    segments_.erase(oldest);
  }
}

size_t SharedSegments::count() const {
  MutexLock lock(&mu_);
  return segments_.size();
}

int64_t SharedSegments::mapped_bytes() const {
  MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [key, entry] : segments_) n += entry.segment->size();
  return n;
}

absl::string_view SharedMemoryRefusalName(SharedMemoryRefusal reason) {
  switch (reason) {
    case SharedMemoryRefusal::kNone:
      return "none";
    case SharedMemoryRefusal::kTooLarge:
      return "too_large";
    case SharedMemoryRefusal::kUnreachable:
      return "unreachable";
    case SharedMemoryRefusal::kNotRegion:
      return "not_region";
  }
  return "none";
}

SharedMemoryRefusal SharedMemoryRefusalOf(const absl::Status& status) {
  static constexpr SharedMemoryRefusal kAll[] = {
      SharedMemoryRefusal::kTooLarge, SharedMemoryRefusal::kUnreachable,
      SharedMemoryRefusal::kNotRegion};
  if (!absl::IsFailedPrecondition(status)) return SharedMemoryRefusal::kNone;
  return ReasonOf(status, kRefusalUrl, kAll, &SharedMemoryRefusalName,
                  SharedMemoryRefusal::kNone);
}

bool IsSharedMemoryRefusal(const absl::Status& status) {
  return SharedMemoryRefusalOf(status) != SharedMemoryRefusal::kNone;
}

}  // namespace ps
}  // namespace psgd
