// A push's sample record as scripts/ledger_check.py reads it.
#include "worker/session/sample_records.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace psgd {
namespace {

TEST_CASE("a push's record is one JSON line in the worker's file") {
  CHECK(SampleRecordsFile("runs/r", 3) == "runs/r/samples-worker-3.jsonl");
  SampleRecord r;
  r.worker = 3;
  r.step = 17;
  r.generation = 1;
  r.epoch = 2;
  r.index = 5;
  r.outcome = StepOutcome::kDroppedSurplus;
  r.samples = {9, 0, 4};
  const std::string line =
      "{\"worker\":3,\"step\":17,\"generation\":1,\"epoch\":2,\"index\":5,"
      "\"outcome\":\"dropped_surplus\",\"samples\":[9,0,4]}";
  CHECK(SampleRecordJson(r).ToString() == line);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp");
  const std::string path = SampleRecordsFile(dir, 3);
  std::filesystem::remove(path);
  for (int i = 0; i < 2; ++i) {  // a restarted worker appends
    auto recorder = SampleRecorder::Open(path);
    REQUIRE(recorder.ok());
    REQUIRE((*recorder)->Write(r).ok());
  }
  std::ifstream in(path);
  std::string a, b, c;
  CHECK(std::getline(in, a));
  CHECK(std::getline(in, b));
  CHECK_FALSE(std::getline(in, c));
  CHECK(a == line);
  CHECK(b == line);
}

TEST_CASE("a chunk leased and never pushed is recorded as not_pushed") {
  SampleRecord r;
  r.worker = 1;
  r.step = 240;
  r.epoch = 3;
  r.index = 23;
  r.outcome = StepOutcome::kApplied;  // not read: nothing was pushed
  r.pushed = false;
  r.samples = {7, 1};
  CHECK(SampleRecordJson(r).ToString() ==
        "{\"worker\":1,\"step\":240,\"generation\":0,\"epoch\":3,"
        "\"index\":23,\"outcome\":\"not_pushed\",\"samples\":[7,1]}");
}

}  // namespace
}  // namespace psgd
