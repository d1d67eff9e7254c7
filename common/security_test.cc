#include "common/security.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

namespace psgd {
namespace {

std::string TempFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
  chmod(path.c_str(), 0600);  // a token file others may read is refused
  return path;
}

// A fresh directory of this user's, mode 0700.
std::string PrivateDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  mkdir(path.c_str(), 0700);
  chmod(path.c_str(), 0700);
  return path;
}

void Write(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

// The message of ReadTokenFile(path)'s error ("" when it read a token).
std::string Refusal(const std::string& path) {
  absl::StatusOr<std::string> t = ReadTokenFile(path);
  return t.ok() ? "" : std::string(t.status().message());
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("tokens of visible ASCII are valid, others are refused") {
  CHECK(ValidateToken("s3cr3t-Token_with.punctuation!~").ok());
  CHECK(ValidateToken(std::string(kMaxTokenBytes, 'a')).ok());
  CHECK(ValidateToken("").message() == "the token is empty");
  CHECK(ValidateToken(std::string(kMaxTokenBytes + 1, 'a')).message() ==
        "the token has 1025 characters, more than 1024");
  CHECK(ValidateToken("two words").message() ==
        "the token has character 4 of code 32: only visible ASCII characters "
        "(no spaces) can travel in gRPC metadata");
  CHECK(!ValidateToken("tab\there").ok());
  CHECK(!ValidateToken("new\nline").ok());
  CHECK(!ValidateToken("caf\xc3\xa9").ok());
  CHECK(!ValidateToken(std::string("nul\0x", 5)).ok());
}

TEST_CASE("a token file is read without its trailing newline") {
  absl::StatusOr<std::string> t = ReadTokenFile(TempFile("token", "abc123\n"));
  REQUIRE(t.ok());
  CHECK(*t == "abc123");
  CHECK(*ReadTokenFile(TempFile("token_crlf", "abc123\r\n \n")) == "abc123");
}

TEST_CASE("bad token files are refused naming the file") {
  const std::string empty = TempFile("empty", "\n");
  CHECK(ReadTokenFile(empty).status().message() ==
        "token file '" + empty + "' is empty");
  const std::string spaced = TempFile("spaced", "two words\n");
  CHECK(ReadTokenFile(spaced).status().message() ==
        "token file '" + spaced +
            "': the token has character 4 of code 32: only visible ASCII "
            "characters (no spaces) can travel in gRPC metadata");
  absl::Status missing = ReadTokenFile("/nonexistent/token").status();
  CHECK(missing.code() == absl::StatusCode::kNotFound);
  CHECK(missing.message() == "no file '/nonexistent/token'");
}

// docs/RELIABILITY.md, "Security": another user who chooses the token file
// (planted in a directory others can write, a directory of their own, a
// link to their file, to /dev/zero or a FIFO) must not give a server their
// token, nor make it read without end or wait forever.
TEST_CASE("every token file is checked: owner, mode, directory, no link") {
  const std::string dir = PrivateDir("checked");
  const std::string good = dir + "/good.token";
  Write(good, "good-token\n", 0600);
  CHECK(*ReadTokenFile(good) == "good-token");

  const std::string readable = dir + "/readable.token";
  Write(readable, "readable-token\n", 0644);
  CHECK(Refusal(readable) == "token file '" + readable +
                                 "' has mode 0644: others may read it; "
                                 "`chmod 600 " +
                                 readable +
                                 "` (or delete it, and the next task makes "
                                 "a new one)");

  const std::string link = dir + "/link.token";
  REQUIRE(symlink(good.c_str(), link.c_str()) == 0);
  CHECK(Refusal(link) == "token file '" + link +
                             "' is a symbolic link: refused (name the real "
                             "file instead)");
  const std::string zero_link = dir + "/zero.token";
  REQUIRE(symlink("/dev/zero", zero_link.c_str()) == 0);
  CHECK(Has(Refusal(zero_link), "is a symbolic link"));
  // Without a limit this read until memory ran out (std::bad_alloc).
  CHECK(Refusal("/dev/zero") ==
        "token file '/dev/zero' is not a regular file of at most 4 KiB");
  const std::string fifo = dir + "/fifo.token";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(Has(Refusal(fifo), "is not a regular file of at most 4 KiB"));
  const std::string big = dir + "/big.token";
  Write(big, std::string(5000, 'a'), 0600);
  CHECK(Has(Refusal(big), "is not a regular file of at most 4 KiB"));

  for (const mode_t mode : {0777, 01777, 0770, 0720}) {
    const std::string open_dir = PrivateDir("open" + std::to_string(mode));
    Write(open_dir + "/t.token", "open-token\n", 0600);
    REQUIRE(chmod(open_dir.c_str(), mode) == 0);
    const std::string r = Refusal(open_dir + "/t.token");
    CHECK(Has(r, "token file '" + open_dir + "/t.token' refused: directory '" +
                     open_dir + "' has mode "));
    CHECK(Has(r, "users other than its owner may add files to it"));
  }

  if (geteuid() == 0) {  // a second user: only root can make their files
    const std::string theirs = dir + "/theirs.token";
    Write(theirs, "their-token\n", 0600);
    REQUIRE(chown(theirs.c_str(), 65534, 65534) == 0);
    CHECK(Refusal(theirs) ==
          "token file '" + theirs +
              "' belongs to uid 65534, neither this user (uid 0) nor root: a "
              "cluster's token must be its own user's");
    const std::string their_dir = PrivateDir("their-dir");
    Write(their_dir + "/t.token", "our-token\n", 0600);
    REQUIRE(chown(their_dir.c_str(), 65534, 65534) == 0);
    CHECK(Has(Refusal(their_dir + "/t.token"),
              "refused: directory '" + their_dir +
                  "' belongs to uid 65534, neither this user (uid 0) nor "
                  "root"));
  }
}

TEST_CASE("PSGD_TOKEN_FILE is checked as the default token file is") {
  const std::string dir = PrivateDir("named");
  const std::string open_dir = PrivateDir("named-open");
  REQUIRE(chmod(open_dir.c_str(), 01777) == 0);
  const std::string planted = open_dir + "/planted.token";
  Write(planted, "planted-token\n", 0600);
  setenv("PSGD_TOKEN_FILE", planted.c_str(), 1);
  absl::StatusOr<DefaultToken> t = ReadOrCreateDefaultToken("c1");
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Has(std::string(t.status().message()),
            "token file '" + planted + "' refused: directory '" + open_dir +
                "' has mode 1777"));
  // Nor is one made there.
  const std::string absent = open_dir + "/absent.token";
  setenv("PSGD_TOKEN_FILE", absent.c_str(), 1);
  t = ReadOrCreateDefaultToken("c1");
  REQUIRE_FALSE(t.ok());
  CHECK(Has(std::string(t.status().message()),
            "token file '" + absent + "' refused: directory '" + open_dir +
                "' has mode 1777"));
  CHECK(access(absent.c_str(), F_OK) != 0);
  // A link to /dev/zero.
  const std::string zero = dir + "/zero.token";
  REQUIRE(symlink("/dev/zero", zero.c_str()) == 0);
  setenv("PSGD_TOKEN_FILE", zero.c_str(), 1);
  CHECK(Has(std::string(ReadOrCreateDefaultToken("c1").status().message()),
            "is a symbolic link"));
  // A private one is made, and read again.
  const std::string fine = dir + "/sub/fine.token";
  setenv("PSGD_TOKEN_FILE", fine.c_str(), 1);
  t = ReadOrCreateDefaultToken("c1");
  REQUIRE(t.ok());
  CHECK(t->file == fine);
  CHECK(*ReadTokenFile(fine) == t->token);
  unsetenv("PSGD_TOKEN_FILE");
}

TEST_CASE("ResolveClusterToken takes inline, then file, then none or default") {
  TokenSource inline_source;
  inline_source.token = "inline-token";
  inline_source.token_file = TempFile("resolve_ignored", "file-token\n");
  absl::StatusOr<ClusterToken> t = ResolveClusterToken("c1", inline_source);
  REQUIRE(t.ok());
  CHECK(t->token == "inline-token");
  CHECK(t->file.empty());
  inline_source.token = "two words";
  CHECK(ResolveClusterToken("c1", inline_source).status().code() ==
        absl::StatusCode::kInvalidArgument);

  TokenSource file_source;
  file_source.token_file = TempFile("resolve_file", "file-token\n");
  t = ResolveClusterToken("c1", file_source);
  REQUIRE(t.ok());
  CHECK(t->token == "file-token");
  CHECK(t->file == file_source.token_file);
  file_source.token_file += ".absent";
  CHECK(ResolveClusterToken("c1", file_source).status().code() ==
        absl::StatusCode::kNotFound);

  TokenSource insecure;
  insecure.insecure = true;
  t = ResolveClusterToken("c1", insecure);
  REQUIRE(t.ok());
  CHECK(t->token.empty());
  CHECK(t->file.empty());

  const std::string dir = PrivateDir("resolve-default");
  const std::string default_file = dir + "/c1.token";
  setenv("PSGD_TOKEN_FILE", default_file.c_str(), 1);
  t = ResolveClusterToken("c1", TokenSource());
  REQUIRE(t.ok());
  CHECK(t->file == default_file);
  CHECK(*ReadTokenFile(default_file) == t->token);
  const std::string open_dir = PrivateDir("resolve-default-open");
  REQUIRE(chmod(open_dir.c_str(), 01777) == 0);
  const std::string refused = open_dir + "/c1.token";
  setenv("PSGD_TOKEN_FILE", refused.c_str(), 1);
  t = ResolveClusterToken("c1", TokenSource());
  REQUIRE_FALSE(t.ok());
  CHECK(
      Has(std::string(t.status().message()), "the cluster's default token: "));
  unsetenv("PSGD_TOKEN_FILE");
}

TEST_CASE("constant-time comparison tells equal from different") {
  CHECK(ConstantTimeEquals("", ""));
  CHECK(ConstantTimeEquals("Bearer abc", "Bearer abc"));
  CHECK_FALSE(ConstantTimeEquals("Bearer abc", "Bearer abd"));
  CHECK_FALSE(ConstantTimeEquals("Bearer abc", "Bearer ab"));
  CHECK_FALSE(ConstantTimeEquals("Bearer abc", "Bearer abcd"));
  CHECK_FALSE(ConstantTimeEquals("", "x"));
  const std::string a(4096, 'z');
  std::string b = a;
  b[4095] = 'y';
  CHECK_FALSE(ConstantTimeEquals(a, b));
  CHECK(ConstantTimeEquals(a, std::string(4096, 'z')));
}

}  // namespace
}  // namespace psgd
