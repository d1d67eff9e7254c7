// Image preprocessing as TensorFlow's cifar10_input.py: the training
// distortions of distorted_inputs() and the evaluation crop of inputs().
// Input images are (3, 32, 32) bytes; outputs are (3, 24, 24) floats.
//
// Thread-safety: pure functions; an Rng is used by one thread at a time.
#ifndef PSGD_WORKER_DATA_AUGMENT_H_
#define PSGD_WORKER_DATA_AUGMENT_H_

#include <cstdint>

#include "worker/random.h"

namespace psgd {

constexpr int64_t kCropSize = 24;
constexpr int64_t kCropPixels = 3 * kCropSize * kCropSize;  // 1728

// x: (n) in place: (x - mean) / max(stddev, 1 / sqrt(n)), the mean and the
// (population) deviation over all n values, as
// tf.image.per_image_standardization.
void StandardizeImage(int64_t n, float* x);

// image: (3, 32, 32) bytes  ->  out: (3, 24, 24), in TensorFlow's order:
//   random 24x24 crop (offsets uniform in 0..8), random left-right flip,
//   random brightness (delta uniform in [-63, 63)), random contrast (factor
//   uniform in [0.2, 1.8), about each channel's mean), standardisation.
// In float arithmetic and without clipping, as TensorFlow's float path; the
// brightness delta therefore cancels in the standardisation (as it does in
// TensorFlow), but it is drawn so that the random stream matches the recipe.
void DistortImage(const uint8_t* image, Rng* rng, float* out);

// image: (3, 32, 32) bytes  ->  out: (3, 24, 24): the central crop
// (offset 4), standardised (TensorFlow's resize_image_with_crop_or_pad).
void CentralCropImage(const uint8_t* image, float* out);

}  // namespace psgd

#endif  // PSGD_WORKER_DATA_AUGMENT_H_
