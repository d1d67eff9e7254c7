// A worker's own batch norm statistics on disk (LOCAL): round trip, no
// file, a damaged file and another model's file.
#include "worker/cluster/local_statistics.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/file_io.h"

namespace psgd {
namespace {

std::string Path(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/local_stats";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

const std::vector<VariableSpec> kSpecs = {
    {"bn1.running_mean", {3}, Initializer::Constant(0)},
    {"bn1.running_var", {3}, Initializer::Constant(1)}};

NamedTensors Values() {
  NamedTensors t;
  t.emplace("bn1.running_mean", *Tensor::FromVector({3}, {0.5f, -1, 2}));
  t.emplace("bn1.running_var", *Tensor::FromVector({3}, {1.5f, 0.25f, 3}));
  return t;
}

TEST_CASE("saved statistics come back as they were") {
  const std::string path = Path("round_trip");
  REQUIRE(SaveLocalStatistics(path, kSpecs, Values()).ok());
  auto loaded = LoadLocalStatistics(path, kSpecs);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->has_value());
  const NamedTensors want = Values();
  for (const VariableSpec& s : kSpecs) {
    const Tensor& a = (**loaded).at(s.name);
    const Tensor& b = want.at(s.name);
    CHECK(std::equal(a.data(), a.data() + a.size(), b.data()));
  }
}

TEST_CASE("no file: nothing to restore") {
  auto loaded = LoadLocalStatistics(Path("absent"), kSpecs);
  REQUIRE(loaded.ok());
  CHECK_FALSE(loaded->has_value());
}

TEST_CASE("a damaged file or another model's is refused naming the file") {
  const std::string path = Path("damaged");
  REQUIRE(SaveLocalStatistics(path, kSpecs, Values()).ok());
  auto bytes = ReadFileToString(path);
  REQUIRE(bytes.ok());
  std::string flipped = *bytes;
  flipped[flipped.size() - 3] ^= 0x40;
  REQUIRE(WriteFileAtomically(path, flipped).ok());
  auto damaged = LoadLocalStatistics(path, kSpecs);
  CHECK(damaged.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(damaged.status().message()), Catch::Contains(path));

  const std::string other = Path("other");
  REQUIRE(SaveLocalStatistics(other, kSpecs, Values()).ok());
  std::vector<VariableSpec> wider = kSpecs;
  wider[1].shape = {4};
  auto refused = LoadLocalStatistics(other, wider);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains(other) && Catch::Contains("bn1.running_var"));
  std::vector<VariableSpec> renamed = kSpecs;
  renamed[0].name = "bn2.running_mean";
  refused = LoadLocalStatistics(other, renamed);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("bn2.running_mean"));
  // A missing tensor is not saved.
  NamedTensors partial = Values();
  partial.erase("bn1.running_var");
  CHECK(SaveLocalStatistics(Path("partial"), kSpecs, partial).code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
