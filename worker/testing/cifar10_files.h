// Writes small CIFAR-10 binary files for tests (in TEST_TMPDIR).
//
// Thread-safety: plain functions.
#ifndef PSGD_WORKER_TESTING_CIFAR10_FILES_H_
#define PSGD_WORKER_TESTING_CIFAR10_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace psgd {
namespace testing {

// A fresh empty directory under TEST_TMPDIR.
std::string MakeTempDir(const std::string& name);

// The pixel byte that the test files hold at (record, position), so that a
// test can check what was read: a function of the file's `file_tag`, the
// record and the position.
uint8_t TestPixel(int file_tag, int64_t record, int64_t position);

// Writes `labels.size()` records with TestPixel pixels; returns the path.
std::string WriteCifar10File(const std::string& dir, const std::string& name,
                             const std::vector<uint8_t>& labels, int file_tag);

// Writes raw bytes (for malformed files).
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);

// All six files of a data set with `records` records each; labels cycle
// through 0..9 from the file's index.
void WriteCifar10Dir(const std::string& dir, int64_t records);

}  // namespace testing
}  // namespace psgd

#endif  // PSGD_WORKER_TESTING_CIFAR10_FILES_H_
