// A synthetic stand-in for CIFAR-10 with the same shapes, for tests and for
// machines without the data: 32x32 RGB images in 10 classes that a small
// CNN learns within a few hundred steps, also through the training
// distortions. Class k is a stripe pattern (horizontal or vertical, one of
// five frequencies, both left-right symmetric so that flips keep the class)
// in a colour mix of its own, at a random phase, plus pixel noise. Labels
// cycle 0..9.
//
// Thread-safety: a pure function.
#ifndef PSGD_WORKER_DATA_SYNTHETIC_H_
#define PSGD_WORKER_DATA_SYNTHETIC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/data/image_set.h"

namespace psgd {

// `count` images; the classes are the same for every seed (so a training
// and a test set drawn with different seeds match), the images differ.
// INVALID_ARGUMENT for count < 1.
absl::StatusOr<ImageSet> MakeSyntheticSet(int64_t count, uint64_t seed);

}  // namespace psgd

#endif  // PSGD_WORKER_DATA_SYNTHETIC_H_
