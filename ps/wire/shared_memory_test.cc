// The worker's region and the server's segments in one process (the server
// side takes the region's descriptor from its own pid like any other's), and
// the shared bytes of a request's tensors.
#include "ps/wire/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/wire/wire.h"

namespace psgd {
namespace ps {
namespace {

// A cap above every region of these tests.
constexpr int64_t kCap = int64_t{1} << 30;

wire::SharedMemory Ref(const SharedRegion& region) {
  wire::SharedMemory ref;
  region.Describe(&ref);
  return ref;
}

TEST_CASE("shared memory: the server sees what the worker wrote, and back") {
  auto region = SharedRegion::Create(4096);
  REQUIRE(region.ok());
  std::memcpy((*region)->data() + 64, "gradient", 8);
  SharedSegments segments;
  auto segment = segments.Attach(Ref(**region), kCap);
  REQUIRE(segment.ok());
  CHECK((*segment)->size() == 4096);
  CHECK(std::string((*segment)->data() + 64, 8) == "gradient");
  std::memcpy((*segment)->data() + 128, "weights", 7);
  CHECK(std::string((*region)->data() + 128, 7) == "weights");
  // Attached once: the same mapping again, kept while it is used.
  auto again = segments.Attach(Ref(**region), kCap);
  REQUIRE(again.ok());
  CHECK(again->get() == segment->get());
  CHECK(segments.count() == 1);
  CHECK(segments.mapped_bytes() == 4096);
}

TEST_CASE("shared memory: what the server refuses to open") {
  auto region = SharedRegion::Create(4096);
  REQUIRE(region.ok());
  SharedSegments segments;
  wire::SharedMemory ref = Ref(**region);

  SECTION("another nonce: not the region the request means") {
    ref.set_nonce_low(ref.nonce_low() ^ 1);
    absl::Status s = segments.Attach(ref, kCap).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNotRegion);
  }
  SECTION("larger than the region") {
    ref.set_size(8192);
    absl::Status s = segments.Attach(ref, kCap).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNotRegion);
  }
  SECTION("larger than the shard's tensors can need") {
    absl::Status s = segments.Attach(ref, 4095).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kTooLarge);
    CHECK(s.message().find("more than the 4095") != absl::string_view::npos);
  }
  SECTION("a descriptor that is no region (a file), named without its path") {
    char path[] = "/tmp/shared_memory_test_XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 4096) == 0);
    ref.set_fd(fd);
    absl::Status s = segments.Attach(ref, kCap).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(s.message().find("not a shared memory region") !=
          absl::string_view::npos);
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNotRegion);
    CHECK(s.message().find("/tmp") == absl::string_view::npos);
    close(fd);
    unlink(path);
  }
  SECTION("an O_PATH descriptor of a file (the open-by-path race's bait)") {
    char path[] = "/tmp/shared_memory_test_XXXXXX";
    const int file = mkstemp(path);
    REQUIRE(file >= 0);
    REQUIRE(write(file, "secret", 6) == 6);
    const int fd = open(path, O_PATH | O_CLOEXEC);
    REQUIRE(fd >= 0);
    ref.set_fd(fd);
    absl::Status s = segments.Attach(ref, kCap).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNotRegion);
    CHECK(s.message().find(path) == absl::string_view::npos);
    close(fd);
    close(file);
    unlink(path);
  }
  SECTION("the region's own descriptor, read-only: taken, not opened again") {
    // The same memfd, seals, size and header, through a read-only open file
    // description. The server maps the descriptor the worker holds
    // (pidfd_getfd): a read-only one cannot be mapped for writing, and is
    // refused. Opening /proc/PID/fd/N again, as before pidfd_getfd, would
    // make a new read-write description of the same file and map it.
    const int fd = open(absl::StrCat("/proc/self/fd/", ref.fd()).c_str(),
                        O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    ref.set_fd(fd);
    absl::Status s = segments.Attach(ref, kCap).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNotRegion);
    close(fd);
  }
  SECTION("a memfd without the seals (one that could shrink under us)") {
    const int fd = memfd_create(kSharedMemfdName, MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 4096) == 0);
    ref.set_fd(fd);
    absl::Status s = segments.Attach(ref, kCap).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNotRegion);
    CHECK(s.message().find("not a shared memory region") !=
          absl::string_view::npos);
    close(fd);
  }
  SECTION("no such process here (a worker on another machine)") {
    SharedSegments elsewhere(false);
    absl::Status s = elsewhere.Attach(ref, kCap).status();
    CHECK(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kUnreachable);
    CHECK(s.message().find("another machine") != absl::string_view::npos);
  }
  SECTION("a size below the header is a bad request, not a refusal") {
    ref.set_size(10);
    absl::Status s = segments.Attach(ref, kCap).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_FALSE(IsSharedMemoryRefusal(s));
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNone);
  }
  CHECK(segments.count() == 0);
}

// The descriptor probe (docs/RELIABILITY.md, Security 60-7): a member names
// descriptors of a process it cannot read (the server's own) and tells from
// the refusals which exist and what they are. Every one it cannot use gets
// the same reason and the same text, bar the fd number it named itself.
TEST_CASE("shared memory: one refusal for every descriptor it cannot use") {
  auto region = SharedRegion::Create(4096);
  REQUIRE(region.ok());
  auto small = SharedRegion::Create(4096);
  REQUIRE(small.ok());
  const wire::SharedMemory good = Ref(**region);
  SharedSegments segments;
  // Descriptors of this process (the server's side plays its own pid).
  char path[] = "/tmp/shared_memory_test_XXXXXX";
  const int file = mkstemp(path);
  REQUIRE(file >= 0);
  REQUIRE(ftruncate(file, 8192) == 0);
  const int opath = open(path, O_PATH | O_CLOEXEC);
  REQUIRE(opath >= 0);
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const int unsealed = memfd_create(kSharedMemfdName, MFD_CLOEXEC);
  REQUIRE(unsealed >= 0);
  REQUIRE(ftruncate(unsealed, 8192) == 0);
  const int closed = dup(file);
  REQUIRE(closed >= 0);
  close(closed);  // a number with nothing behind it

  struct Probe {
    const char* what;
    wire::SharedMemory ref;
  };
  auto with_fd = [&](int fd) {
    wire::SharedMemory ref = good;
    ref.set_fd(fd);
    return ref;
  };
  std::vector<Probe> probes = {
      {"no descriptor by that number", with_fd(closed)},
      {"a number far past any open one", with_fd(1 << 20)},
      {"a negative number", with_fd(-1)},
      {"a regular file", with_fd(file)},
      {"an O_PATH descriptor", with_fd(opath)},
      {"a pipe", with_fd(pipe_fds[0])},
      {"a memfd without the seals", with_fd(unsealed)},
      {"the region, asked for more than it holds", good},
      {"the region with another nonce", good},
      {"another region (its header not the request's)",
       with_fd(Ref(**small).fd())},
  };
  probes[7].ref.set_size(8192);
  probes[8].ref.set_nonce_high(good.nonce_high() ^ 1);
  std::string first;
  for (const Probe& probe : probes) {
    INFO(probe.what);
    absl::Status s = segments.Attach(probe.ref, kCap).status();
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(SharedMemoryRefusalOf(s) == SharedMemoryRefusal::kNotRegion);
    // The text after the "(fd N): " that names what the caller sent.
    const std::string fd_part = absl::StrCat("(fd ", probe.ref.fd(), "): ");
    const size_t at = s.message().find(fd_part);
    REQUIRE(at != absl::string_view::npos);
    const std::string why(s.message().substr(at + fd_part.size()));
    if (first.empty()) first = why;
    CHECK(why == first);
    CHECK(why.find(path) == std::string::npos);
  }
  CHECK(segments.count() == 0);
  // The region itself is still taken.
  CHECK(segments.Attach(good, kCap).ok());
  close(unsealed);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(opath);
  close(file);
  unlink(path);
}

TEST_CASE("shared memory: a refusal is told by its reason, not its text") {
  // A message that reads like a refusal is none without the reason.
  CHECK_FALSE(IsSharedMemoryRefusal(absl::FailedPreconditionError(
      "shared memory segment of process 1 (fd 3): not sealed")));
  for (SharedMemoryRefusal r :
       {SharedMemoryRefusal::kTooLarge, SharedMemoryRefusal::kUnreachable,
        SharedMemoryRefusal::kNotRegion}) {
    CHECK(SharedMemoryRefusalName(r) != "none");
  }
}

TEST_CASE("shared memory: a region cannot shrink under the server") {
  auto region = SharedRegion::Create(1 << 16);
  REQUIRE(region.ok());
  SharedSegments segments;
  auto segment = segments.Attach(Ref(**region), kCap);
  REQUIRE(segment.ok());
  // The worker's own descriptor: ftruncate refuses (F_SEAL_SHRINK), so the
  // server's mapping stays backed and its copies never fault (SIGBUS).
  wire::SharedMemory ref = Ref(**region);
  CHECK(ftruncate(ref.fd(), 4096) != 0);
  CHECK(ftruncate(ref.fd(), 1 << 20) != 0);
  CHECK(fcntl(ref.fd(), F_GET_SEALS) & F_SEAL_SEAL);
  std::memset((*segment)->data() + 64, 1, (1 << 16) - 64);
}

TEST_CASE("shared memory: a grown region is a new segment") {
  SharedSegments segments;
  auto small = SharedRegion::Create(1024);
  auto large = SharedRegion::Create(1 << 20);
  REQUIRE(small.ok());
  REQUIRE(large.ok());
  REQUIRE(segments.Attach(Ref(**small), kCap).ok());
  REQUIRE(segments.Attach(Ref(**large), kCap).ok());
  CHECK(segments.count() == 2);
  CHECK(segments.mapped_bytes() == 1024 + (1 << 20));
}

TEST_CASE("shared memory: tensors laid out after the header, aligned") {
  SharedLayout layout;
  CHECK(layout.Add(10) == 64);
  CHECK(layout.Add(64) == 128);
  CHECK(layout.Add(0) == 192);
  CHECK(layout.Add(1) == 192);
  CHECK(layout.size() == 256);
}

TEST_CASE("shared memory: a request's tensors read from the segment") {
  std::string segment(512, '\0');
  const float values[2] = {1.5f, -2.0f};
  std::memcpy(&segment[64], values, sizeof(values));
  google::protobuf::RepeatedPtrField<wire::TensorData> tensors;
  wire::TensorData* t = tensors.Add();
  t->mutable_spec()->set_name("b");
  t->mutable_spec()->add_shape(2);
  t->set_dtype(wire::DT_FLOAT32);
  t->mutable_shared()->set_offset(64);
  t->mutable_shared()->set_size(8);

  auto read = TensorBytesFromProto(tensors, segment);
  REQUIRE(read.ok());
  REQUIRE((*read)[0].data.size() == 8);
  CHECK((*read)[0].data.data() == segment.data() + 64);

  SECTION("no segment named") {
    absl::Status s = TensorBytesFromProto(tensors).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().find("tensor b") != absl::string_view::npos);
  }
  SECTION("bytes past the segment's end") {
    t->mutable_shared()->set_offset(508);
    absl::Status s = TensorBytesFromProto(tensors, segment).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().find("not within") != absl::string_view::npos);
  }
  SECTION("bytes in the header") {
    t->mutable_shared()->set_offset(8);
    CHECK(TensorBytesFromProto(tensors, segment).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
  SECTION("an offset that would overflow") {
    t->mutable_shared()->set_offset(64);
    t->mutable_shared()->set_size(INT64_MAX);
    CHECK(TensorBytesFromProto(tensors, segment).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
  SECTION("shared bytes beside data") {
    t->set_data("xxxxxxxx");
    CHECK(TensorBytesFromProto(tensors, segment).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ps
}  // namespace psgd
