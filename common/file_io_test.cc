#include "common/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace psgd {
namespace {

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

TEST_CASE("CRC-32C matches the published check value") {
  CHECK(Crc32c("123456789") == 0xE3069283u);
  CHECK(Crc32c("") == 0u);
  // Incremental use gives the same result.
  CHECK(Crc32c("56789", Crc32c("1234")) == 0xE3069283u);
}

TEST_CASE("atomic writes replace whole files and leave no temporary") {
  std::string dir = TmpDir() + "/atomic/a/b";
  REQUIRE(MakeDirectories(dir).ok());
  std::string path = dir + "/f";
  REQUIRE(WriteFileAtomically(path, "first").ok());
  REQUIRE(WriteFileAtomically(path, "second, longer").ok());
  absl::StatusOr<std::string> got = ReadFileToString(path);
  REQUIRE(got.ok());
  CHECK(*got == "second, longer");
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    CHECK(e.path().filename() == "f");  // no temporary left
    ++entries;
  }
  CHECK(entries == 1);
  // A directory that does not exist: an error naming the path.
  absl::Status s = WriteFileAtomically(TmpDir() + "/no/such/dir/f", "x");
  CHECK(s.code() == absl::StatusCode::kInternal);
  CHECK(s.message().find("/no/such/dir/f") != absl::string_view::npos);
}

TEST_CASE("threads of one process may write the same file at once") {
  // Two shards of one process completing a checkpoint's MANIFEST together.
  std::string dir = TmpDir() + "/atomic_threads";
  REQUIRE(MakeDirectories(dir).ok());
  const std::string path = dir + "/MANIFEST";
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (!WriteFileAtomically(path, std::string(100, 'a' + t)).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failures == 0);
  absl::StatusOr<std::string> got = ReadFileToString(path);
  REQUIRE(got.ok());
  CHECK(got->size() == 100);
  CHECK(*got == std::string(100, (*got)[0]));  // one writer's whole file
}

TEST_CASE("own directories: made, and refused when a link or another's") {
  const std::string base = TmpDir() + "/own";
  CHECK(MakeOwnDirectories(base + "/a/step-1").ok());
  struct stat st;
  REQUIRE(stat((base + "/a/step-1").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(MakeOwnDirectories(base + "/a/step-1").ok());  // exists: fine
  // A link planted where a step directory goes is not written through.
  REQUIRE(mkdir((base + "/elsewhere").c_str(), 0755) == 0);
  REQUIRE(symlink((base + "/elsewhere").c_str(),
                  (base + "/a/step-2").c_str()) == 0);
  absl::Status s = MakeOwnDirectories(base + "/a/step-2");
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find("is a link") != absl::string_view::npos);
  if (geteuid() == 0) {
    // Another user's directory (root can make one for the test).
    REQUIRE(mkdir((base + "/theirs").c_str(), 0777) == 0);
    REQUIRE(chown((base + "/theirs").c_str(), 65534, 65534) == 0);
    s = MakeOwnDirectories(base + "/theirs");
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(s.message().find("belongs to uid 65534") != absl::string_view::npos);
  }
}

TEST_CASE("framed payloads round-trip and damage is detected") {
  std::string payload(1000, 'p');
  payload[10] = 'q';
  std::string framed = FrameChecksummed("PSGDTEST", payload);
  absl::StatusOr<std::string> back =
      UnframeChecksummed("PSGDTEST", framed, "f.ckpt");
  REQUIRE(back.ok());
  CHECK(*back == payload);

  auto error_of = [](absl::string_view bytes) {
    absl::StatusOr<std::string> r =
        UnframeChecksummed("PSGDTEST", bytes, "f.ckpt");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kDataLoss);
    return std::string(r.status().message());
  };
  CHECK(error_of(framed.substr(0, 500)) ==
        "f.ckpt: truncated: the header says 1000 payload bytes, the file "
        "has 480");
  CHECK(error_of(framed + "x") ==
        "f.ckpt: oversized: the header says 1000 payload bytes, the file "
        "has 1001");
  CHECK(error_of("short") ==
        "f.ckpt: truncated: 5 bytes, shorter than the 20-byte header");
  std::string flipped = framed;
  flipped[600] ^= 1;
  CHECK(error_of(flipped) == "f.ckpt: checksum mismatch (the file is corrupt)");
  std::string other = framed;
  other[0] = 'X';
  CHECK(error_of(other) ==
        "f.ckpt: not a 'PSGDTEST' file (wrong magic at offset 0)");
}

}  // namespace
}  // namespace psgd
