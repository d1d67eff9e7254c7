// Image preprocessing. The tutorial network's, as TensorFlow's
// cifar10_input.py: the training distortions of distorted_inputs() and the
// evaluation crop of inputs(); (3, 32, 32) bytes in, (3, 24, 24) floats out.
// The layer-graph networks' (worker/models/cifar_networks.h), the standard
// CIFAR recipe (torchvision's RandomCrop(32, padding=4),
// RandomHorizontalFlip, Normalize): (3, 32, 32) bytes in, (3, 32, 32) floats
// out.
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

constexpr int64_t kCifarSize = 32;
constexpr int64_t kCifarPixels = 3 * kCifarSize * kCifarSize;  // 3072
// CIFAR-10's training-set channel means and deviations (R, G, B) of pixels
// scaled to [0, 1].
constexpr float kCifarMean[3] = {0.4914f, 0.4822f, 0.4465f};
constexpr float kCifarStd[3] = {0.2470f, 0.2435f, 0.2616f};

// image: (3, 32, 32) bytes  ->  out: (3, 32, 32): zero padding of 4 on
// every side, a random 32x32 crop (offsets uniform in 0..8, top first), a
// random left-right flip (probability 1/2), then (v / 255 - mean[c]) /
// std[c] (padding pixels are 0 before normalisation, as torchvision pads
// the image).
void PadCropFlipNormalize(const uint8_t* image, Rng* rng, float* out);

// image: (3, 32, 32) bytes  ->  out: (3, 32, 32): normalisation only (the
// evaluation path of the same recipe).
void NormalizeCifarImage(const uint8_t* image, float* out);

}  // namespace psgd

#endif  // PSGD_WORKER_DATA_AUGMENT_H_
