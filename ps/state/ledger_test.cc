// The ledger file: lines reach the file only when written, in the order
// they were added whatever thread writes them; Flush puts them on disk and
// says the file's length, Truncate cuts back to a checkpoint's length and
// never pads the file.
#include "ps/state/ledger.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psgd {
namespace ps {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/ledger_",
                                  Catch::rngSeed(), "_", std::rand());
  std::filesystem::create_directories(path);
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<Ledger> MustOpen(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Ledger>> ledger =
      Ledger::Open(path, "shard 0");
  REQUIRE(ledger.ok());
  return *std::move(ledger);
}

TEST_CASE("lines reach the file when written, in order") {
  const std::string path = TempDir() + "/sub/ledger.jsonl";  // folder made
  std::unique_ptr<Ledger> ledger = MustOpen(path);
  ledger->Add("a");
  ledger->Add("bb");
  CHECK(ReadAll(path).empty());
  ledger->Write();
  CHECK(ReadAll(path) == "a\nbb\n");
  ledger->Add("ccc");
  CHECK(ledger->Flush() == 9);
  CHECK(ReadAll(path) == "a\nbb\nccc\n");
  ledger.reset();
  // Opened again, it appends.
  ledger = MustOpen(path);
  CHECK(ledger->Flush() == 9);
  ledger->Add("d");
  ledger.reset();  // the destructor writes what is pending
  CHECK(ReadAll(path) == "a\nbb\nccc\nd\n");
}

TEST_CASE(
    "Truncate cuts back to a checkpoint's length, pending lines included") {
  const std::string path = TempDir() + "/ledger.jsonl";
  std::unique_ptr<Ledger> ledger = MustOpen(path);
  ledger->Add("step 1");
  const int64_t saved = ledger->Flush();  // a checkpoint here
  ledger->Add("step 2");
  ledger->Write();
  ledger->Add("step 3");  // pending at the rollback
  ledger->Truncate(saved);
  CHECK(ledger->Flush() == saved);
  CHECK(ReadAll(path) == "step 1\n");
  ledger->Add("step 2 again");
  ledger->Write();
  CHECK(ReadAll(path) == "step 1\nstep 2 again\n");
}

TEST_CASE("Truncate never pads the file past what it holds") {
  const std::string path = TempDir() + "/ledger.jsonl";
  std::unique_ptr<Ledger> ledger = MustOpen(path);
  ledger->Add("only");
  ledger->Write();
  ledger->Truncate(100);
  CHECK(ReadAll(path) == "only\n");
  CHECK(ledger->Flush() == 5);
}

TEST_CASE("lines from several threads reach the file in the order added") {
  const std::string path = TempDir() + "/ledger.jsonl";
  std::unique_ptr<Ledger> ledger = MustOpen(path);
  // As in a shard: Add under one lock (which fixes the order), Write after.
  Mutex shard_mu;
  int next = 0;
  constexpr int kThreads = 4;
  constexpr int kLines = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kLines; ++i) {
        {
          MutexLock lock(&shard_mu);
          ledger->Add(absl::StrCat(next++));
        }
        ledger->Write();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ledger->Write();
  const std::vector<std::string> lines =
      absl::StrSplit(ReadAll(path), '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == kThreads * kLines);
  for (int i = 0; i < kThreads * kLines; ++i)
    CHECK(lines[i] == absl::StrCat(i));
}

TEST_CASE("a ledger that cannot be opened is named in the error") {
  const std::string dir = TempDir();
  std::ofstream(dir + "/file") << "x";
  absl::StatusOr<std::unique_ptr<Ledger>> ledger =
      Ledger::Open(dir + "/file/ledger.jsonl", "shard 1");
  REQUIRE_FALSE(ledger.ok());
  CHECK(ledger.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(ledger.status().message())
            .find("shard 1: the ledger " + dir + "/file/ledger.jsonl: '" + dir +
                  "/file' is not a directory") == 0);
}

// Where another user could have put something at the ledger's name or
// folder (a link to a file of root's, a folder of their own), nothing is
// created or written, and the error names the file.
TEST_CASE("a ledger is never opened through a link or in another's folder") {
  const std::string dir = TempDir();
  const std::string elsewhere = dir + "/root-only";
  std::filesystem::create_directories(elsewhere);
  // A link at the ledger's name, to a file that does not exist yet.
  std::filesystem::create_directories(dir + "/ckpt");
  REQUIRE(symlink((elsewhere + "/made").c_str(),
                  (dir + "/ckpt/ledger.jsonl").c_str()) == 0);
  absl::StatusOr<std::unique_ptr<Ledger>> ledger =
      Ledger::Open(dir + "/ckpt/ledger.jsonl", "shard 0");
  REQUIRE_FALSE(ledger.ok());
  CHECK(ledger.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(ledger.status().message())
            .find("shard 0: cannot open the ledger " + dir +
                  "/ckpt/ledger.jsonl") == 0);
  CHECK(std::string(ledger.status().message()).find("symbolic link") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(elsewhere + "/made"));

  // The folder itself a link to a folder of root's.
  REQUIRE(symlink(elsewhere.c_str(), (dir + "/linked").c_str()) == 0);
  ledger = Ledger::Open(dir + "/linked/ledger.jsonl", "shard 0");
  REQUIRE_FALSE(ledger.ok());
  CHECK(ledger.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(ledger.status().message()).find("is a link") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(elsewhere + "/ledger.jsonl"));

  // A folder others may write.
  std::filesystem::create_directories(dir + "/open");
  REQUIRE(chmod((dir + "/open").c_str(), 01777) == 0);
  ledger = Ledger::Open(dir + "/open/ledger.jsonl", "shard 0");
  REQUIRE_FALSE(ledger.ok());
  CHECK(std::string(ledger.status().message())
            .find("has mode 1777: users other than its owner may add files "
                  "to it") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/open/ledger.jsonl"));

  // A folder of another user's (only root can make one to test with).
  if (geteuid() == 0) {
    std::filesystem::create_directories(dir + "/theirs");
    REQUIRE(chown((dir + "/theirs").c_str(), 65534, 65534) == 0);
    ledger = Ledger::Open(dir + "/theirs/ledger.jsonl", "shard 0");
    REQUIRE_FALSE(ledger.ok());
    CHECK(std::string(ledger.status().message()).find("belongs to uid 65534") !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir + "/theirs/ledger.jsonl"));
  }
}

}  // namespace
}  // namespace ps
}  // namespace psgd
