// Reader for the official binary version of CIFAR-10
// (cifar-10-binary.tar.gz -> cifar-10-batches-bin/): data_batch_1.bin ..
// data_batch_5.bin (training, 50,000 images) and test_batch.bin (10,000).
// Each file is 10,000 records of 1 label byte (0..9) and 3,072 pixel bytes.
//
// Everything read is checked; a file that is missing, shorter or longer
// than its records, or holds a label above 9 is refused with a Status naming
// the file and the byte offset, and nothing of a refused load is returned.
//
// Thread-safety: pure functions (they read files).
#ifndef PSGD_WORKER_DATA_CIFAR10_READER_H_
#define PSGD_WORKER_DATA_CIFAR10_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/image_set.h"

namespace psgd {

enum class Split { kTrain, kTest };

constexpr int64_t kCifar10RecordBytes = 1 + ImageSet::kImageBytes;  // 3073
constexpr int64_t kCifar10RecordsPerFile = 10000;

// The file names of a split, in order.
std::vector<std::string> Cifar10FileNames(Split split);

// Reads one batch file of exactly `records` records. NOT_FOUND when it does
// not exist; DATA_LOSS for a wrong size (saying where the records end) or a
// label above 9 (naming the record and its offset).
absl::StatusOr<ImageSet> ReadCifar10File(
    const std::string& path, int64_t records = kCifar10RecordsPerFile);

// Reads a split from `dir`, which holds the .bin files or is a directory
// whose cifar-10-batches-bin/ subdirectory does. NOT_FOUND naming the
// directory or the first missing file, with what to run to get the data;
// FAILED_PRECONDITION when `dir` is not a directory; errors of
// ReadCifar10File otherwise.
absl::StatusOr<ImageSet> LoadCifar10(
    const std::string& dir, Split split,
    int64_t records_per_file = kCifar10RecordsPerFile);

}  // namespace psgd

#endif  // PSGD_WORKER_DATA_CIFAR10_READER_H_
