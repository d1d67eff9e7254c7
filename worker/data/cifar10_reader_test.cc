#include "worker/data/cifar10_reader.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "worker/testing/cifar10_files.h"

namespace psgd {
namespace {

using testing::MakeTempDir;
using testing::TestPixel;
using testing::WriteBytes;
using testing::WriteCifar10Dir;
using testing::WriteCifar10File;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST_CASE("a well-formed file reads labels and pixels in order") {
  const std::string dir = MakeTempDir("reader_good");
  const std::string path = WriteCifar10File(dir, "b.bin", {3, 9, 0}, 5);
  absl::StatusOr<ImageSet> set = ReadCifar10File(path, 3);
  REQUIRE(set.ok());
  CHECK(set->count() == 3);
  CHECK(set->labels == std::vector<uint8_t>{3, 9, 0});
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t p : {0, 1, 1023, 1024, 3071}) {
      CHECK(set->image(r)[p] == TestPixel(5, r, p));
    }
  }
}

TEST_CASE("truncated, oversized and mislabelled files name file and offset") {
  const std::string dir = MakeTempDir("reader_bad");
  const std::string path = WriteCifar10File(dir, "b.bin", {1, 2, 3}, 0);
  std::vector<uint8_t> bytes(3 * 3073);
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(bytes.data()), bytes.size());
  }

  std::vector<uint8_t> truncated(bytes.begin(), bytes.end() - 100);
  WriteBytes(path, truncated);
  absl::Status s = ReadCifar10File(path, 3).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(Message(s),
             Catch::Contains(path) && Catch::Contains("truncated") &&
                 Catch::Contains("offset 9119") && Catch::Contains("record 2"));

  std::vector<uint8_t> oversized = bytes;
  oversized.push_back(7);
  WriteBytes(path, oversized);
  s = ReadCifar10File(path, 3).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(Message(s), Catch::Contains(path) &&
                             Catch::Contains("oversized") &&
                             Catch::Contains("offset 9219"));

  std::vector<uint8_t> mislabelled = bytes;
  mislabelled[3073] = 10;
  WriteBytes(path, mislabelled);
  s = ReadCifar10File(path, 3).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(Message(s), Catch::Contains(path) &&
                             Catch::Contains("record 1 at offset 3073") &&
                             Catch::Contains("label 10"));

  WriteBytes(path, {});
  s = ReadCifar10File(path, 3).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(Message(s), Catch::Contains("offset 0"));

  s = ReadCifar10File(dir + "/nothing.bin", 3).status();
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(Message(s), Catch::Contains("nothing.bin") &&
                             Catch::Contains("get_cifar10.sh"));
}

TEST_CASE("a directory loads both splits, also through its parent") {
  const std::string parent = MakeTempDir("reader_dir");
  const std::string dir = parent + "/cifar-10-batches-bin";
  std::filesystem::create_directories(dir);
  WriteCifar10Dir(dir, 4);
  for (const std::string& d : {dir, parent}) {
    absl::StatusOr<ImageSet> train = LoadCifar10(d, Split::kTrain, 4);
    REQUIRE(train.ok());
    CHECK(train->count() == 20);
    // data_batch_2's first record follows data_batch_1's four.
    CHECK(train->labels[4] == 1);
    CHECK(train->image(4)[10] == TestPixel(1, 0, 10));
    absl::StatusOr<ImageSet> test = LoadCifar10(d, Split::kTest, 4);
    REQUIRE(test.ok());
    CHECK(test->count() == 4);
    CHECK(test->image(3)[3071] == TestPixel(5, 3, 3071));
  }
}

TEST_CASE("missing, empty and wrong directories are refused clearly") {
  absl::Status s = LoadCifar10("/nonexistent/cifar", Split::kTrain).status();
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(Message(s), Catch::Contains("/nonexistent/cifar") &&
                             Catch::Contains("get_cifar10.sh"));

  const std::string empty = MakeTempDir("reader_empty");
  s = LoadCifar10(empty, Split::kTest).status();
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(Message(s), Catch::Contains("test_batch.bin: missing"));

  const std::string partial = MakeTempDir("reader_partial");
  WriteCifar10Dir(partial, 2);
  std::filesystem::remove(partial + "/data_batch_4.bin");
  s = LoadCifar10(partial, Split::kTrain, 2).status();
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(Message(s), Catch::Contains("data_batch_4.bin: missing"));

  // A file given where a directory belongs.
  s = LoadCifar10(partial + "/test_batch.bin", Split::kTest, 2).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(s), Catch::Contains("not a directory"));

  CHECK(LoadCifar10("", Split::kTest).status().code() ==
        absl::StatusCode::kInvalidArgument);

  // Files of the wrong size (here: records_per_file says 3, files hold 2).
  s = LoadCifar10(partial, Split::kTest, 3).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace psgd
