#include "common/event_file.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Spit(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

TEST_CASE("the masked CRC-32C of TensorFlow's records") {
  // crc32c("") = 0 and crc32c("123456789") = 0xe3069283 (the check value),
  // each masked: rotated right by 15, plus 0xa282ead8.
  CHECK(MaskedCrc32c("") == 0xa282ead8u);
  const uint32_t crc = 0xe3069283u;
  CHECK(MaskedCrc32c("123456789") ==
        static_cast<uint32_t>(((crc >> 15) | (crc << 17)) + 0xa282ead8u));
}

TEST_CASE("scalars written are read back, every CRC checked") {
  const std::string dir = TestDir("events");
  auto w = EventFileWriter::Create(dir, "worker-0");
  REQUIRE(w.ok());
  CHECK((*w)->path().find(dir + "/events.out.tfevents.") == 0);
  REQUIRE((*w)->WriteScalar("train/loss", 1, 2.5, 100.25).ok());
  REQUIRE((*w)->WriteScalar("train/loss", 2, 2.0, 101.5).ok());
  REQUIRE((*w)->WriteScalar("test/accuracy", 2, 0.125, 102.0).ok());
  REQUIRE((*w)->Flush().ok());
  auto events = ReadEventFile((*w)->path());
  INFO(events.status().ToString());
  REQUIRE(events.ok());
  REQUIRE(events->size() == 4);
  CHECK((*events)[0].file_version() == "brain.Event:2");
  CHECK((*events)[1].step() == 1);
  CHECK((*events)[1].wall_time() == 100.25);
  CHECK((*events)[1].summary().value(0).tag() == "train/loss");
  CHECK((*events)[1].summary().value(0).simple_value() == 2.5f);
  CHECK((*events)[3].summary().value(0).tag() == "test/accuracy");
  CHECK((*events)[3].summary().value(0).simple_value() == 0.125f);
}

TEST_CASE("a malformed event file is reported with the record's offset") {
  const std::string dir = TestDir("bad_events");
  auto w = EventFileWriter::Create(dir, "");
  REQUIRE(w.ok());
  REQUIRE((*w)->WriteScalar("x", 1, 1.0, 1.0).ok());
  REQUIRE((*w)->Flush().ok());
  const std::string path = (*w)->path();
  const std::string good = Slurp(path);
  auto first = ReadEventFile(path);
  REQUIRE(first.ok());
  REQUIRE(first->size() == 2);
  // The file_version record's size: where the scalar's record starts.
  const size_t start = 12 + (*first)[0].ByteSizeLong() + 4;

  std::string flipped = good;
  flipped[start + 12 + 2] ^= 0x10;  // a byte of the scalar's data
  Spit(path, flipped);
  absl::Status s = ReadEventFile(path).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(s.message() == absl::StrCat("event file ", path, ": record at byte ",
                                    start,
                                    ": the data's CRC differs (corrupt)"));

  Spit(path, good.substr(0, good.size() - 3));
  s = ReadEventFile(path).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(s.message())
            .find(absl::StrCat("record at byte ", start, ": truncated")) !=
        std::string::npos);

  std::string bad_length = good;
  bad_length[start] ^= 0x01;
  Spit(path, bad_length);
  s = ReadEventFile(path).status();
  CHECK(std::string(s.message()).find("the length's CRC differs") !=
        std::string::npos);

  CHECK(ReadEventFile(dir + "/none").status().code() ==
        absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psgd
