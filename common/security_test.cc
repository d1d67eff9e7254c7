#include "common/security.h"

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
  return path;
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
