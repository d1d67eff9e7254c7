#include "worker/testing/cifar10_files.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace psgd {
namespace testing {

namespace fs = std::filesystem;

std::string MakeTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

uint8_t TestPixel(int file_tag, int64_t record, int64_t position) {
  return static_cast<uint8_t>((file_tag * 31 + record * 7 + position) % 251);
}

std::string WriteCifar10File(const std::string& dir, const std::string& name,
                             const std::vector<uint8_t>& labels, int file_tag) {
  std::vector<uint8_t> bytes;
  for (size_t r = 0; r < labels.size(); ++r) {
    bytes.push_back(labels[r]);
    for (int64_t p = 0; p < 3072; ++p)
      bytes.push_back(TestPixel(file_tag, r, p));
  }
  const std::string path = (fs::path(dir) / name).string();
  WriteBytes(path, bytes);
  return path;
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void WriteCifar10Dir(const std::string& dir, int64_t records) {
  const char* names[] = {"data_batch_1.bin", "data_batch_2.bin",
                         "data_batch_3.bin", "data_batch_4.bin",
                         "data_batch_5.bin", "test_batch.bin"};
  for (int f = 0; f < 6; ++f) {
    std::vector<uint8_t> labels(records);
    for (int64_t r = 0; r < records; ++r) labels[r] = (f + r) % 10;
    WriteCifar10File(dir, names[f], labels, f);
  }
}

}  // namespace testing
}  // namespace psgd
