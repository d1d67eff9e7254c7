// The data sets a worker trains on, selected by name: "cifar10" (the binary
// files in a directory) or "synthetic" (made in memory). Both give a
// training and a test ImageSet of 32x32 RGB images in 10 classes.
//
// Thread-safety: OpenDataset is a pure function; a Dataset is a value.
#ifndef PSGD_WORKER_DATA_DATASET_H_
#define PSGD_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/cifar10_reader.h"
#include "worker/data/image_set.h"

namespace psgd {

struct DataOptions {
  std::string name = "cifar10";  // "cifar10" or "synthetic"
  // cifar10: the directory of the .bin files (or its parent).
  std::string data_dir;
  int64_t records_per_file = kCifar10RecordsPerFile;  // tests write fewer
  // synthetic: the set sizes and the seed of the training images (the test
  // images use another seed derived from it).
  int64_t synthetic_train = 10000;
  int64_t synthetic_test = 2000;
  uint64_t synthetic_seed = 1;
};

struct Dataset {
  std::string name;
  ImageSet train;
  ImageSet test;
};

// INVALID_ARGUMENT for an unknown name; the readers' errors for cifar10
// (NOT_FOUND naming a missing directory or file, DATA_LOSS naming a bad
// file and offset).
absl::StatusOr<Dataset> OpenDataset(const DataOptions& options);

}  // namespace psgd

#endif  // PSGD_WORKER_DATA_DATASET_H_
